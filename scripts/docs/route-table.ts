import { defaultConfig } from '../../src/config/config-schema.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeBackend } from '../../src/backends/fake/fake-backend.js';
import { buildApp } from '../../src/http/app.js';
import { Services } from '../../src/services/services.js';
import { openStore } from '../../src/state/store.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { cell, table } from './markers.js';

/** One operation of the OpenAPI document. */
export interface Route {
  method: string;
  path: string;
  operationId: string;
  summary: string;
}

type Document = { paths: Record<string, Record<string, { operationId?: string; summary?: string }>> };

/**
 * The operations of the OpenAPI document the app serves at GET /openapi.json, built as the
 * unit tests build it (test/helpers/fake-app.ts): the fake backend, a SQLite store in a
 * temporary folder, no keys.
 */
export async function servedRoutes(): Promise<Route[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-docs-'));
  const store = await openStore(dataDir);
  const logger = silentLogger();
  const services = new Services({
    config: defaultConfig({ dataDir, poolSize: 0 }),
    store,
    backend: new FakeBackend(),
    logger,
  });
  const app = await buildApp({ services, apiKeys: [], logger });
  try {
    const document = (await app.inject({ url: '/openapi.json' })).json() as Document;
    return Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([method]) => method !== 'head')
        .map(([method, operation]) => ({ method: method.toUpperCase(), path, operationId: operation.operationId ?? '', summary: operation.summary ?? '' })),
    );
  } finally {
    await app.close();
    await services.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Every route of the API: method, path, operationId, summary, by path. */
export function routesTable(routes: Route[]): string {
  const sorted = [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
  return table(
    ['method', 'path', 'operationId', 'summary'],
    sorted.map((route) => [route.method, `\`${route.path}\``, `\`${route.operationId}\``, cell(route.summary)]),
  );
}
