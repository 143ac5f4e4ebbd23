import { isIP } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeBackend } from '../../src/backends/fake/fake-backend.js';
import type { ServiceError } from '../../src/errors.js';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/route-types.js';
import type { Clock } from '../../src/services/support/clock.js';
import type { EventSettings } from '../../src/services/events/observability.js';
import { defaultConfig, type Config } from '../../src/config/config-schema.js';
import type { ServiceInputs } from '../../src/services/context.js';
import { allMigrations } from '../../src/services/domains.js';
import { Services } from '../../src/services/services.js';
import { openStore, type Store } from '../../src/state/store.js';
import type { StoreEngine } from '../../src/services/durable/stores/index.js';
import { silentLogger, type Logger } from '../../src/telemetry/logger.js';

export interface FakeHarness {
  app: App;
  services: Services;
  backend: FakeBackend;
  store: Store;
  dataDir: string;
  close(): Promise<void>;
}

/**
 * Names for the store engine doubles: an address resolves to itself, `localhost` and
 * `*.loopback.test` to 127.0.0.1, any other name to a public address (never connected to).
 */
export const doubleResolver = async (host: string): Promise<string[]> => {
  if (isIP(host)) return [host];
  if (host === 'localhost' || host.endsWith('.loopback.test')) return ['127.0.0.1'];
  return ['1.1.1.1'];
};

/** The whole service over the fake backend and a real SQLite store in a temporary folder. */
export async function fakeHarness(
  settings: Partial<Config> & ServiceInputs = {},
  clock?: Clock,
  events?: EventSettings,
  /** Store engines to offer (test doubles in unit tests), a logger to read what was logged, the dashboard's files. */
  extra: { engines?: StoreEngine[]; logger?: Logger; webRoot?: string } = {},
): Promise<FakeHarness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-unit-'));
  const store = await openStore(dataDir, allMigrations());
  const backend = new FakeBackend();
  const logger = extra.logger ?? silentLogger();
  const { namedKeys = [], hostLimits, egress, storeResolver, ...options } = settings;
  // The schema's defaults, but no pool made ahead of demand (unit tests count what they make),
  // and the test's own values, given as the parsed config holds them.
  const config: Config = { ...defaultConfig({ dataDir }), poolSize: 0, ...options, namedKeys };
  const services = new Services({
    config,
    ...(hostLimits ? { hostLimits } : {}),
    ...(egress ? { egress } : {}),
    store,
    backend,
    logger,
    ...(clock ? { clock } : {}),
    ...(events ? { events } : {}),
    ...(extra.engines ? { engines: extra.engines } : {}),
    // Store engine doubles connect nowhere: their hosts (db.test...) resolve to a public address.
    ...(storeResolver ? { storeResolver } : extra.engines ? { storeResolver: doubleResolver } : {}),
  });
  const app = await buildApp({ services, apiKeys: config.apiKeys, namedKeys, logger, ...(extra.webRoot ? { webRoot: extra.webRoot } : {}) });
  return {
    app,
    services,
    backend,
    store,
    dataDir,
    async close() {
      await app.close();
      await services.close();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The error code a service call fails with, or 'OK'. */
export async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (err) {
    return (err as ServiceError).code;
  }
  return 'OK';
}
