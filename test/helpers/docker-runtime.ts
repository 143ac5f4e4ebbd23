import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { loadConfig } from '../../src/config/load-config.js';
import type { OptionName } from '../../src/config/config-schema.js';
import { startRuntime, type Runtime } from '../../src/runtime.js';
import type { EgressSettings } from '../../src/services/egress/index.js';
import type { Clock } from '../../src/services/support/clock.js';
import { silentLogger, type Logger } from '../../src/telemetry/logger.js';

export const BASE_IMAGE = 'sandboxd/base:bookworm';

/**
 * sandboxd's Docker networks and packet-filter chains of this test file (each file loads this
 * module anew): named apart from a real server's `sandboxd`, removed when its last runtime is disposed.
 */
const TEST_NETWORK = `t${Math.random().toString(36).slice(2, 9)}`;
let liveRuntimes = 0;

export interface DockerRuntime extends Runtime {
  url: string;
  dataDir: string;
  /** Closes the runtime, removes every sandbox it made and its data directory. */
  dispose(): Promise<void>;
}

/**
 * A real service on the Docker backend, listening on a free loopback port; `clock` replaces the
 * system time, `logger` the silent one. A `dataDir` flag reopens that directory (a restart);
 * otherwise a new one is made.
 */
export async function dockerRuntime(
  flags: Partial<Record<OptionName, unknown>> = {},
  clock?: Clock,
  logger: Logger = silentLogger(),
  /** Egress settings beyond the flags' (a name resolver, sandboxes' egress rules). */
  egress?: Partial<EgressSettings>,
): Promise<DockerRuntime> {
  const dataDir = typeof flags.dataDir === 'string' ? flags.dataDir : mkdtempSync(join(tmpdir(), 'sandboxd-it-'));
  const config = loadConfig({ env: {}, flags: { dataDir, port: 0, networkName: TEST_NETWORK, ...flags } });
  const runtime = await startRuntime(config, logger, { listen: true, ...(clock ? { clock } : {}), ...(egress ? { egress } : {}) });
  liveRuntimes += 1;
  let open = true;
  const close = async () => {
    await runtime.close();
    if (open) liveRuntimes -= 1;
    open = false;
  };
  return {
    ...runtime,
    url: runtime.url!,
    dataDir,
    close,
    async dispose() {
      for (const snapshot of await runtime.services.snapshots.list()) {
        await runtime.services.snapshots.delete(snapshot.name).catch(() => undefined);
      }
      for (const sandbox of await runtime.services.sandboxes.list()) {
        await runtime.services.sandboxes.remove(sandbox.name).catch(() => undefined);
      }
      await close();
      rmSync(dataDir, { recursive: true, force: true });
      const egress = (runtime.backend as Partial<DockerBackend>).egress;
      if (liveRuntimes === 0 && egress && !flags.networkName) await egress.teardown().catch(() => undefined);
    },
  };
}

/** A unique sandbox name per test run. */
export const uniqueName = (prefix: string) => `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

/** JSON request to a running server; returns status and parsed body. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(base + path, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // non-JSON bodies stay text
  }
  return { status: res.status, body: parsed };
}
