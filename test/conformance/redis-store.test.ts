/**
 * The redis engine against the Redis server on 127.0.0.1:6379, writing only keys under its
 * own prefix (random suffix), which it deletes; it fails, never skips, when the server does
 * not answer. The time-limit case runs against a listener that never answers (a hung server):
 * every command that could run long on a real one is refused by name.
 */
import net from 'node:net';
import { createClient } from '@redis/client';
import { RedisEngine } from '../../src/services/durable/stores/engines/redis/redis-engine.js';
import { runSuffix } from '../helpers/store-engines.js';
import { storeEngineConformance } from './store-engine-conformance.js';

const P = `sbx:redis-conf:${runSuffix()}:`;
let stores = 0;
const hung = net.createServer(() => undefined);

storeEngineConformance({
  title: 'redis',
  make: async () => {
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    return new RedisEngine();
  },
  target: (engine, config = {}) => {
    stores += 1;
    return { id: `redis-${stores}`, name: `redis-${stores}`, kind: 'redis', config: engine.checkConfig({ host: '127.0.0.1', ...config }), file: '' };
  },
  placement: { kind: 'server', closed: { host: '127.0.0.1', port: 1 } },
  commands: {
    writes: (key) => [['SET', P + key, 'v'], ['MSET', P + key, '1'], ['INCR', `${P}${key}:n`], ['HSET', `${P}${key}:h`, 'f', 'v'], ['EXPIRE', P + key, 100], ['DEL', P + key]],
    reads: (key) => [['GET', P + key], ['MGET', P + key], ['EXISTS', P + key], ['TTL', P + key], ['HGETALL', `${P}${key}:h`], ['SCAN', '0', 'MATCH', `${P}*`], ['PING']],
    roundTrip: (key, value) => ({ put: ['SET', P + key, value], get: ['GET', P + key], value: (answer) => answer }),
    jsonValues: false,
    keyless: false,
    counter: (key) => ({ bump: ['INCR', P + key], read: ['GET', P + key], value: (answer) => Number(answer) }),
    slow: {
      command: ['GET', `${P}slow`],
      handle: async (context) => {
        const engine = context.engine();
        const { port } = hung.address() as net.AddressInfo;
        return engine.open({ ...context.subject.target(engine), config: engine.checkConfig({ host: '127.0.0.1', port }) });
      },
      answers: 'TIMEOUT',
    },
    full: { skip: "a redis store has no size limit of its own: the server's maxmemory answers (an OOM reply)" },
  },
  cleanup: async () => {
    hung.close();
    const admin = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
    await admin.connect();
    const keys = await admin.keys(`${P}*`);
    if (keys.length > 0) await admin.del(keys);
    await admin.close();
  },
});
