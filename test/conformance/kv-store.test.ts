import { KvStoreEngine } from '../../src/services/durable/stores/engines/kv/kv-engine.js';
import { systemClock } from '../../src/services/support/clock.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { hostFiles } from './embedded-subject.js';
import { storeEngineConformance } from './store-engine-conformance.js';

const files = hostFiles('kv');

storeEngineConformance({
  title: 'kv',
  make: async () => new KvStoreEngine({ clock: systemClock, logger: silentLogger(), sweepSeconds: 0 }),
  target: (engine, config) => files.target(engine, config),
  placement: { kind: 'host-file' },
  commands: {
    writes: (key) => [['SET', key, 'v'], ['MSET', key, 1], ['INCR', `${key}:n`], ['DECRBY', `${key}:n`, 2], ['EXPIRE', key, 100], ['DEL', key], ['FLUSHDB']],
    reads: (key) => [['GET', key], ['MGET', key], ['EXISTS', key], ['TTL', key], ['SCAN', '0'], ['DBSIZE']],
    roundTrip: (key, value) => ({ put: ['SET', key, value], get: ['GET', key], value: (answer) => answer }),
    jsonValues: true,
    keyless: false,
    counter: (key) => ({ bump: ['INCR', key], read: ['GET', key], value: (answer) => answer as number }),
    slow: { skip: 'a kv command is one short synchronous transaction: none runs long enough to reach a time limit' },
    full: { config: { max_bytes: 1024 }, fill: ['SET', 'big', 'x'.repeat(2000)] },
  },
  cleanup: async () => files.remove(),
});
