import { SqliteStoreEngine } from '../../src/services/durable/stores/engines/sqlite/sqlite-engine.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { hostFiles } from './embedded-subject.js';
import { storeEngineConformance } from './store-engine-conformance.js';
import { SQLITE_DIALECT } from './sqlite-dialect.js';

const files = hostFiles('sqlite');

storeEngineConformance({
  title: 'sqlite on the host (worker processes; run npm run build first)',
  make: async () =>
    new SqliteStoreEngine({
      workers: 2,
      exec: async () => {
        throw new Error('a host store never runs in a sandbox');
      },
      logger: silentLogger(),
    }),
  target: (engine, config) => files.target(engine, config),
  placement: { kind: 'host-file' },
  sql: SQLITE_DIALECT,
  cleanup: async () => files.remove(),
});
