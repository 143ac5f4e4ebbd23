import { QueueStoreEngine } from '../../src/services/durable/stores/engines/queue/queue-engine.js';
import { systemClock } from '../../src/services/support/clock.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { hostFiles } from './embedded-subject.js';
import { storeEngineConformance } from './store-engine-conformance.js';

const files = hostFiles('queue');
/** The body of the first message of a DEQUEUE's answer. */
const firstBody = (answer: unknown) => (answer as { body: unknown }[])[0]?.body;

storeEngineConformance({
  title: 'queue',
  make: async () => new QueueStoreEngine({ clock: systemClock, logger: silentLogger(), sweepSeconds: 0 }),
  target: (engine, config) => files.target(engine, config),
  placement: { kind: 'host-file' },
  commands: {
    // DEQUEUE writes: it hides the messages it hands out and uses up an attempt.
    writes: (key) => [['ENQUEUE', key], ['ENQUEUE', key, 'DEDUP', key], ['DEQUEUE', 'COUNT', 2], ['REDRIVE'], ['PURGE']],
    reads: () => [['PEEK'], ['STATS'], ['DEAD']],
    roundTrip: (_key, value) => ({ put: ['ENQUEUE', value], get: ['DEQUEUE'], value: firstBody }),
    jsonValues: true,
    keyless: true,
    counter: () => ({ bump: ['ENQUEUE', 'one'], read: ['STATS'], value: (answer) => (answer as { ready: number }).ready }),
    slow: {
      command: ['DEQUEUE', 'WAIT', 20],
      handle: async (context) => (await context.newStore()).handle,
      answers: { value: [] },
    },
    full: { config: { max_bytes: 1024 }, fill: ['ENQUEUE', 'x'.repeat(2000)] },
  },
  cleanup: async () => files.remove(),
});
