/**
 * The sqlite engine for a store bound to a sandbox (`config.path`): its SQL runs in the
 * sandbox's python3, on a real sandbox of the Docker backend. Uses Docker: run it under the
 * shared lock (`flock /tmp/sandboxd-docker.lock npx vitest run ...`).
 */
import { SqliteStoreEngine } from '../../src/services/durable/stores/engines/sqlite/sqlite-engine.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { storeEngineConformance } from './store-engine-conformance.js';
import { SQLITE_DIALECT } from './sqlite-dialect.js';

const sandbox = uniqueName('sqlconf');
let rt: DockerRuntime | undefined;
let stores = 0;

storeEngineConformance({
  title: 'sqlite in a sandbox (python3 in the sandbox)',
  make: async () => {
    rt = await dockerRuntime();
    const created = await call(rt.url, 'POST', '/sandboxes', { name: sandbox });
    if (created.status !== 201) throw new Error(`sandbox not created: ${JSON.stringify(created.body)}`);
    const runtime = rt;
    return new SqliteStoreEngine({ exec: (name, input) => runtime.services.exec.exec(name, input), logger: silentLogger() });
  },
  target: (engine, config = {}) => {
    stores += 1;
    return {
      id: `in-sandbox-${stores}`,
      name: `in-sandbox-${stores}`,
      kind: 'sqlite',
      sandbox,
      config: engine.checkConfig({ path: `/workspace/conformance-${stores}.db`, ...config }),
      file: '/nonexistent/host/file.sqlite',
    };
  },
  placement: {
    kind: 'sandbox',
    fileExists: async (path) => {
      const result = await call(rt!.url, 'POST', `/sandboxes/${sandbox}/exec`, { command: ['test', '-f', path] });
      return result.body.data.exit_code === 0;
    },
  },
  sql: SQLITE_DIALECT,
  cleanup: async () => {
    await rt?.dispose();
  },
});
