import { existsSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { QueueStoreEngine } from '../../../../../../../src/services/durable/stores/engines/queue/queue-engine.js';
import type { StoreHandle, StoreTarget } from '../../../../../../../src/services/durable/stores/store-engine.js';
import { systemClock } from '../../../../../../../src/services/support/clock.js';
import { silentLogger } from '../../../../../../../src/telemetry/logger.js';
import { EmbeddedStores, expectFailure, run } from '../../../../../../helpers/embedded-store.js';
import { manualClock } from '../../../../../../helpers/manual-clock.js';

interface Delivered {
  id: string;
  body: unknown;
  receipt: string;
  attempts: number;
  enqueued_at: string;
}

let time: ReturnType<typeof manualClock>;
let engine: QueueStoreEngine;
let stores: EmbeddedStores;
let target: StoreTarget;
let queue: StoreHandle;

beforeEach(async () => {
  time = manualClock();
  engine = new QueueStoreEngine({ clock: time.clock, logger: silentLogger(), sweepSeconds: 0 });
  stores = new EmbeddedStores(engine, 'queue');
  ({ target, handle: queue } = await stores.create());
});

afterEach(async () => {
  await engine.shutdown();
  stores.remove();
});

const enqueue = async (handle: StoreHandle, body: unknown, ...options: unknown[]) =>
  ((await run(handle, ['ENQUEUE', body, ...options])) as { id: string }).id;
const dequeue = async (handle: StoreHandle, ...options: unknown[]) => (await run(handle, ['DEQUEUE', ...options])) as Delivered[];
const bodies = (messages: { body: unknown }[]) => messages.map((m) => m.body);

describe('queue config', () => {
  it('fills the defaults (those of SQS)', () => {
    expect(engine.checkConfig({})).toEqual({
      visibility_timeout_seconds: 30,
      max_attempts: 5,
      retention_seconds: 345600,
      max_message_bytes: 262144,
      max_messages: 100000,
      max_bytes: 268435456,
      read_only: false,
    });
  });

  it.each([
    ['visibility_timeout_seconds', -1],
    ['visibility_timeout_seconds', 43201],
    ['visibility_timeout_seconds', '30'],
    ['max_attempts', 0],
    ['max_attempts', 2.5],
    ['retention_seconds', 59],
    ['retention_seconds', 1209601],
    ['max_message_bytes', 0],
    ['max_message_bytes', 1048577],
    ['max_messages', 0],
    ['max_messages', '100'],
    ['max_bytes', 1000],
  ])('refuses %s = %j naming the field', (field, value) => {
    expect(() => engine.checkConfig({ [field]: value })).toThrow(`config.${field}: must be an integer between`);
  });

  it('takes null as the default (a PATCH that removes a setting)', () => {
    expect(engine.checkConfig({ max_attempts: null })).toMatchObject({ max_attempts: 5 });
  });

  it('refuses unknown fields and a read_only that is not a boolean', () => {
    expect(() => engine.checkConfig({ visibility_timeout: 30 })).toThrow('config.visibility_timeout: unknown field for a queue store');
    expect(() => engine.checkConfig({ read_only: 1 })).toThrow('config.read_only: must be true or false');
  });
});

describe('queue files', () => {
  it('prepare makes the file, destroy deletes it', async () => {
    await enqueue(queue, 'x');
    expect(await queue.sizeBytes?.()).toBeGreaterThan(0);
    await engine.destroy(target);
    for (const suffix of ['', '-wal', '-shm']) expect(existsSync(target.file + suffix)).toBe(false);
    await expectFailure(run(queue, ['STATS']), 'STORE_UNAVAILABLE', "queue store 'store1' is closed");
  });

  it('a missing file is 503', async () => {
    await expectFailure(engine.open(stores.target({}, 'lost')), 'STORE_UNAVAILABLE', "queue store 'lost' cannot be opened: its file is missing");
  });

  it('messages survive a close and a new open', async () => {
    await enqueue(queue, { job: 1 });
    await queue.close();
    const again = await engine.open(target);
    expect(bodies(await dequeue(again))).toEqual([{ job: 1 }]);
  });
});

describe('queue ENQUEUE and DEQUEUE', () => {
  it('delivers a message with its id, body, receipt, attempts and enqueue time', async () => {
    const id = await enqueue(queue, { to: 'a@example.com', n: [1, 2] });
    const [message, ...rest] = await dequeue(queue);
    expect(rest).toEqual([]);
    const body = { to: 'a@example.com', n: [1, 2] };
    expect(message).toEqual({ id, body, receipt: expect.any(String), attempts: 1, enqueued_at: '2026-01-01T00:00:00.000Z' });
    expect(await dequeue(queue)).toEqual([]);
  });

  it('an empty queue answers [] at once', async () => {
    expect(await dequeue(queue, 'COUNT', 10)).toEqual([]);
  });

  it('orders by priority (higher first), then first in, first out', async () => {
    for (const [body, priority] of [['low1', -1], ['mid1', 0], ['high1', 5], ['mid2', 0], ['high2', 5], ['low2', -1]] as const) {
      await enqueue(queue, body, 'PRIORITY', priority);
    }
    expect(bodies(await dequeue(queue, 'COUNT', 3))).toEqual(['high1', 'high2', 'mid1']);
    expect(bodies(await dequeue(queue, 'count', '100'))).toEqual(['mid2', 'low1', 'low2']);
  });

  it('DELAY hides a message until its time', async () => {
    await enqueue(queue, 'later', 'DELAY', 10);
    await enqueue(queue, 'now');
    expect(bodies(await dequeue(queue, 'COUNT', 10))).toEqual(['now']);
    time.advance(9.999);
    expect(await dequeue(queue)).toEqual([]);
    time.advance(0.001);
    expect(bodies(await dequeue(queue))).toEqual(['later']);
  });

  it('receipts are opaque, random and new on every delivery', async () => {
    for (let i = 0; i < 20; i++) await enqueue(queue, i);
    const receipts = (await dequeue(queue, 'COUNT', 20, 'VISIBILITY', 0)).map((m) => m.receipt);
    const again = (await dequeue(queue, 'COUNT', 20)).map((m) => m.receipt);
    const all = new Set([...receipts, ...again]);
    expect(all.size).toBe(40);
    for (const receipt of all) expect(receipt).toMatch(/^[A-Za-z0-9_-]{24}$/);
  });

  it('DEDUP within 5 minutes answers the first id and adds nothing, even after the first is acknowledged', async () => {
    const first = await enqueue(queue, 'a', 'DEDUP', 'order-17');
    expect(await enqueue(queue, 'b', 'dedup', 'order-17')).toBe(first);
    const [message] = await dequeue(queue);
    expect(await run(queue, ['ACK', message?.receipt])).toBe(1);
    time.advance(299);
    expect(await enqueue(queue, 'c', 'DEDUP', 'order-17')).toBe(first);
    expect(await run(queue, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 0 });
    time.advance(1);
    const second = await enqueue(queue, 'd', 'DEDUP', 'order-17');
    expect(second).not.toBe(first);
    expect(await enqueue(queue, 'e', 'DEDUP', 'order-18')).not.toBe(second);
    expect(bodies(await dequeue(queue, 'COUNT', 10))).toEqual(['d', 'e']);
  });
});

describe('queue visibility, receipts and redelivery', () => {
  it('a message not acknowledged within its visibility timeout is delivered again; the old receipt is stale', async () => {
    const id = await enqueue(queue, 'job');
    const [first] = await dequeue(queue);
    time.advance(29);
    expect(await dequeue(queue)).toEqual([]);
    time.advance(1);
    const [second] = await dequeue(queue);
    expect(second).toMatchObject({ id, body: 'job', attempts: 2 });
    expect(second?.receipt).not.toBe(first?.receipt);
    expect(await run(queue, ['ACK', first?.receipt])).toBe(0);
    expect(await run(queue, ['NACK', first?.receipt])).toBe(0);
    expect(await run(queue, ['EXTEND', first?.receipt, 60])).toBeNull();
    expect(await run(queue, ['ACK', second?.receipt, second?.receipt])).toBe(1);
    expect(await run(queue, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 0 });
  });

  it('VISIBILITY overrides the store default; config.visibility_timeout_seconds sets it', async () => {
    const { handle } = await stores.create({ visibility_timeout_seconds: 5 }, 'short');
    await enqueue(handle, 'a');
    await enqueue(handle, 'b');
    await dequeue(handle);
    await dequeue(handle, 'VISIBILITY', 60);
    time.advance(5);
    expect(bodies(await dequeue(handle, 'COUNT', 10))).toEqual(['a']);
  });

  it('ACK counts the receipts it deleted', async () => {
    for (const body of ['a', 'b', 'c']) await enqueue(queue, body);
    const receipts = (await dequeue(queue, 'COUNT', 3)).map((m) => m.receipt);
    expect(await run(queue, ['ACK', ...receipts, 'no-such-receipt'])).toBe(3);
    expect(await run(queue, ['ACK', ...receipts])).toBe(0);
  });

  it('a late ACK still deletes a message whose visibility ended, as long as no one received it again', async () => {
    await enqueue(queue, 'slow');
    const [message] = await dequeue(queue);
    time.advance(60);
    expect(await run(queue, ['ACK', message?.receipt])).toBe(1);
    expect(await dequeue(queue)).toEqual([]);
  });

  it('NACK makes a message visible again at once or after DELAY; its receipt is then spent', async () => {
    await enqueue(queue, 'retry');
    let [message] = await dequeue(queue);
    expect(await run(queue, ['NACK', message?.receipt])).toBe(1);
    expect(await run(queue, ['NACK', message?.receipt])).toBe(0);
    [message] = await dequeue(queue);
    expect(message?.attempts).toBe(2);
    expect(await run(queue, ['nack', message?.receipt, 'delay', 10])).toBe(1);
    expect(await run(queue, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 1, dead: 0 });
    time.advance(10);
    expect(bodies(await dequeue(queue))).toEqual(['retry']);
  });

  it('EXTEND moves the visibility deadline and answers it', async () => {
    await enqueue(queue, 'long job');
    const [message] = await dequeue(queue);
    time.advance(20);
    expect(await run(queue, ['EXTEND', message?.receipt, 60])).toBe('2026-01-01T00:01:20.000Z');
    time.advance(59);
    expect(await dequeue(queue)).toEqual([]);
    time.advance(1);
    expect(await dequeue(queue)).toHaveLength(1);
  });
});

describe('queue dead letters', () => {
  it('after max_attempts deliveries a message is dead; REDRIVE makes it ready with its attempts reset', async () => {
    const { handle } = await stores.create({ max_attempts: 2 }, 'dlq');
    const id = await enqueue(handle, 'poison');
    await enqueue(handle, 'fine');
    expect((await dequeue(handle, 'COUNT', 2)).map((m) => m.attempts)).toEqual([1, 1]);
    time.advance(30);
    const second = await dequeue(handle, 'COUNT', 2);
    expect(second.map((m) => m.attempts)).toEqual([2, 2]);
    await run(handle, ['ACK', second[1]?.receipt]);
    time.advance(30);
    expect(await dequeue(handle)).toEqual([]);
    expect(await run(handle, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 1 });
    expect(await run(handle, ['DEAD'])).toEqual([{ id, body: 'poison', attempts: 2, priority: 0, enqueued_at: '2026-01-01T00:00:00.000Z' }]);
    expect(await run(handle, ['REDRIVE'])).toBe(1);
    expect(await run(handle, ['DEAD'])).toEqual([]);
    const [again] = await dequeue(handle);
    expect(again).toMatchObject({ id, attempts: 1 });
  });

  it('a NACKed message that used its last attempt is dead', async () => {
    const { handle } = await stores.create({ max_attempts: 1 }, 'once');
    await enqueue(handle, 'x');
    const [message] = await dequeue(handle);
    await run(handle, ['NACK', message?.receipt]);
    expect(await run(handle, ['STATS'])).toMatchObject({ ready: 0, dead: 1 });
    expect(await dequeue(handle)).toEqual([]);
  });
});

describe('queue PEEK, STATS, PURGE', () => {
  it('PEEK shows what DEQUEUE would deliver without delivering it', async () => {
    for (let i = 0; i < 12; i++) await enqueue(queue, i, 'PRIORITY', i === 11 ? 1 : 0);
    const peeked = (await run(queue, ['PEEK'])) as { body: unknown; attempts: number }[];
    expect(bodies(peeked)).toEqual([11, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(peeked[0]).toMatchObject({ attempts: 0, priority: 1 });
    expect(bodies((await run(queue, ['PEEK', 'COUNT', 2])) as { body: unknown }[])).toEqual([11, 0]);
    expect(bodies(await dequeue(queue, 'COUNT', 2))).toEqual([11, 0]);
  });

  it('STATS counts each state', async () => {
    await enqueue(queue, 'ready');
    await enqueue(queue, 'delayed', 'DELAY', 60);
    await enqueue(queue, 'in flight', 'PRIORITY', 9);
    await dequeue(queue);
    expect(await run(queue, ['STATS'])).toEqual({ ready: 1, in_flight: 1, delayed: 1, dead: 0 });
  });

  it('PURGE deletes every message and says how many; the queue works on', async () => {
    await enqueue(queue, 'a');
    await enqueue(queue, 'b', 'DELAY', 60);
    await dequeue(queue);
    expect(await run(queue, ['PURGE'])).toBe(2);
    expect(await run(queue, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 0 });
    await enqueue(queue, 'c');
    expect(bodies(await dequeue(queue))).toEqual(['c']);
  });
});

describe('queue limits and retention', () => {
  it('a body over max_message_bytes is 413', async () => {
    const { handle } = await stores.create({ max_message_bytes: 10 }, 'small');
    await enqueue(handle, '12345678');
    await expectFailure(run(handle, ['ENQUEUE', '123456789']), 'PAYLOAD_TOO_LARGE', 'command: ENQUEUE: body is 11 bytes as JSON, more than 10');
  });

  it('a queue past max_messages is 413 until a message goes', async () => {
    const { handle } = await stores.create({ max_messages: 2 }, 'tiny');
    await enqueue(handle, 1);
    await enqueue(handle, 2);
    await expectFailure(
      run(handle, ['ENQUEUE', 3]),
      'PAYLOAD_TOO_LARGE',
      "command: ENQUEUE: queue 'tiny' is full: it holds 2 messages, config.max_messages is 2",
    );
    const [message] = await dequeue(handle);
    await run(handle, ['ACK', message?.receipt]);
    await enqueue(handle, 3);
  });

  it('a queue past max_bytes is 413', async () => {
    const { handle } = await stores.create({ max_bytes: 2048 }, 'bytes');
    await enqueue(handle, 'x'.repeat(1500));
    await expectFailure(run(handle, ['ENQUEUE', 'x'.repeat(600)]), 'PAYLOAD_TOO_LARGE', 'more than config.max_bytes (2048)');
    expect(await run(handle, ['STATS'])).toMatchObject({ ready: 1 });
  });

  it('the sweep deletes messages past retention and ended DEDUP windows', async () => {
    const { handle } = await stores.create({ retention_seconds: 3600 }, 'short-lived');
    await enqueue(handle, 'old', 'DEDUP', 'd1');
    time.advance(1800);
    await enqueue(handle, 'newer');
    time.advance(1800);
    await engine.sweep();
    expect(bodies((await run(handle, ['PEEK'])) as { body: unknown }[])).toEqual(['newer']);
    const again = await enqueue(handle, 'again', 'DEDUP', 'd1');
    expect(bodies((await run(handle, ['PEEK'])) as { body: unknown }[])).toEqual(['newer', 'again']);
    expect(again).toEqual(expect.any(String));
  });
});

describe('queue long polling (WAIT)', () => {
  it('a waiting DEQUEUE is woken by an ENQUEUE through another handle', async () => {
    const producer = await engine.open(target);
    const waiting = dequeue(queue, 'WAIT', 20);
    await enqueue(producer, 'wake up');
    expect(bodies(await waiting)).toEqual(['wake up']);
  });

  it('a waiting DEQUEUE is woken by a NACK', async () => {
    await enqueue(queue, 'job');
    const [message] = await dequeue(queue);
    const waiting = dequeue(queue, 'WAIT', 20);
    await run(queue, ['NACK', message?.receipt]);
    expect(await waiting).toMatchObject([{ body: 'job', attempts: 2 }]);
  });

  it('a waiting DEQUEUE is woken by a REDRIVE (not by a NACK that made a dead letter)', async () => {
    const { handle } = await stores.create({ max_attempts: 1 }, 'wake');
    await enqueue(handle, 'job');
    const [message] = await dequeue(handle);
    const waiting = dequeue(handle, 'WAIT', 20);
    await run(handle, ['NACK', message?.receipt]);
    expect(await run(handle, ['STATS'])).toMatchObject({ dead: 1 });
    expect(await run(handle, ['REDRIVE'])).toBe(1);
    expect(await waiting).toMatchObject([{ body: 'job', attempts: 1 }]);
  });

  it('ends with [] at WAIT or at the request timeout, whichever is first', async () => {
    expect(await run(queue, ['DEQUEUE', 'WAIT', 20], 50)).toEqual([]);
    expect(await run(queue, ['DEQUEUE', 'WAIT', 1], 60_000)).toEqual([]);
  });

  it('ends with [] when the handle closes, the store is deleted or the server shuts down', async () => {
    const closing = dequeue(queue, 'WAIT', 20);
    await queue.close();
    expect(await closing).toEqual([]);

    const other = await stores.create({}, 'deleted');
    const deleting = dequeue(other.handle, 'WAIT', 20);
    await engine.destroy(other.target);
    expect(await deleting).toEqual([]);

    const last = await stores.create({}, 'last');
    const stopping = dequeue(last.handle, 'WAIT', 20);
    await engine.shutdown();
    expect(await stopping).toEqual([]);
  });

  it('wakes when a delayed message becomes visible, with no ENQUEUE', async () => {
    const real = new QueueStoreEngine({ clock: systemClock, logger: silentLogger(), sweepSeconds: 0 });
    const realStores = new EmbeddedStores(real, 'queue');
    try {
      const { handle } = await realStores.create();
      await enqueue(handle, 'soon', 'DELAY', 1);
      expect(bodies(await dequeue(handle, 'WAIT', 20))).toEqual(['soon']);
    } finally {
      await real.shutdown();
      realStores.remove();
    }
  });

  it('one ENQUEUE is delivered to one of two waiters; the other times out empty', async () => {
    const second = await engine.open(target);
    const waiters = [run(queue, ['DEQUEUE', 'WAIT', 20], 300), run(second, ['DEQUEUE', 'WAIT', 20], 300)];
    await enqueue(queue, 'only one');
    const results = (await Promise.all(waiters)) as Delivered[][];
    expect(results.flat().map((m) => m.body)).toEqual(['only one']);
  });
});

describe('queue concurrency', () => {
  it('callers on two handles never receive the same message twice', async () => {
    const other = await engine.open(target);
    for (let i = 0; i < 30; i++) await enqueue(i % 2 ? queue : other, i);
    const batches = await Promise.all(Array.from({ length: 40 }, (_, i) => dequeue(i % 2 ? queue : other)));
    const delivered = batches.flat().map((m) => m.body as number);
    expect(delivered).toHaveLength(30);
    expect(new Set(delivered).size).toBe(30);
    // PURGE through one handle makes the table again; the other's statements follow.
    expect(await run(queue, ['PURGE'])).toBe(30);
    await enqueue(other, 'after');
    expect(bodies(await dequeue(queue))).toEqual(['after']);
  });
});

describe('queue bad commands', () => {
  it.each([
    [[], 'command: must be an array whose first element is the command name'],
    [['SEND', 'x'], "command: unknown queue command 'SEND' (queue stores answer ENQUEUE, DEQUEUE, ACK"],
    [['GET', 'k'], "unknown queue command 'GET'"],
    [['ENQUEUE'], 'command: wrong number of arguments for ENQUEUE (usage: ENQUEUE body [DELAY seconds] [DEDUP id] [PRIORITY n])'],
    [['ACK'], 'wrong number of arguments for ACK (usage: ACK receipt [receipt ...] (at most 1000))'],
    [['NACK'], 'wrong number of arguments for NACK'],
    [['EXTEND', 'r'], 'wrong number of arguments for EXTEND (usage: EXTEND receipt seconds)'],
    [['STATS', 'x'], 'wrong number of arguments for STATS'],
    [['PURGE', 'x'], 'wrong number of arguments for PURGE'],
    [['REDRIVE', 'x'], 'wrong number of arguments for REDRIVE'],
    [['PEEK', 'COUNT', 1, 'x'], 'wrong number of arguments for PEEK'],
    [['DEAD', 'COUNT', 1, 'x'], 'wrong number of arguments for DEAD'],
    [['DEQUEUE', 'COUNT', 1, 'WAIT', 1, 'VISIBILITY', 1, 'X'], 'wrong number of arguments for DEQUEUE'],
    [['ENQUEUE', 'x', 'DELAY', 901], 'command: ENQUEUE: DELAY must be an integer between 0 and 900, got 901'],
    [['ENQUEUE', 'x', 'DELAY', -1], 'ENQUEUE: DELAY must be an integer between 0 and 900'],
    [['ENQUEUE', 'x', 'PRIORITY', 'high'], 'ENQUEUE: PRIORITY must be an integer between -2147483647 and 2147483647, got "high"'],
    [['ENQUEUE', 'x', 'DEDUP', ''], 'ENQUEUE: DEDUP must not be empty'],
    [['ENQUEUE', 'x', 'DEDUP', 17], 'ENQUEUE: DEDUP must be a string, got 17'],
    [['ENQUEUE', 'x', 'DEDUP', 'd'.repeat(129)], 'ENQUEUE: DEDUP is longer than 128 bytes'],
    [['ENQUEUE', 'x', 'TTL', 5], 'ENQUEUE: unknown option "TTL" (options: DELAY, DEDUP, PRIORITY)'],
    [['ENQUEUE', 'x', 'DELAY', 1, 'DELAY', 2], 'ENQUEUE: option DELAY given twice'],
    [['ENQUEUE', 'x', 'DELAY'], 'ENQUEUE: option DELAY needs a value'],
    [['DEQUEUE', 'COUNT', 0], 'command: DEQUEUE: COUNT must be an integer between 1 and 100, got 0'],
    [['DEQUEUE', 'COUNT', 101], 'DEQUEUE: COUNT must be an integer between 1 and 100'],
    [['DEQUEUE', 'WAIT', 21], 'DEQUEUE: WAIT must be an integer between 0 and 20, got 21'],
    [['DEQUEUE', 'VISIBILITY', -1], 'DEQUEUE: VISIBILITY must be an integer between 0 and 43200'],
    [['DEQUEUE', 'VISIBILITY', 1.5], 'DEQUEUE: VISIBILITY must be an integer'],
    [['DEQUEUE', 'BLOCK', 1], 'DEQUEUE: unknown option "BLOCK" (options: COUNT, VISIBILITY, WAIT)'],
    [['ACK', 5], 'command: ACK: receipt must be a string, got 5'],
    [['ACK', 'r'.repeat(65)], 'ACK: receipt is longer than 64 bytes'],
    [['NACK', 'r', 'DELAY', 43201], 'NACK: DELAY must be an integer between 0 and 43200'],
    [['NACK', 'r', 'LATER'], 'NACK: unknown option "LATER" (options: DELAY)'],
    [['EXTEND', 'r', -1], 'EXTEND: seconds must be an integer between 0 and 43200, got -1'],
    [['EXTEND', null, 10], 'EXTEND: receipt must be a string, got null'],
    [['PEEK', 'COUNT', 101], 'PEEK: COUNT must be an integer between 1 and 100'],
    [['DEAD', 'LIMIT', 1], 'DEAD: unknown option "LIMIT" (options: COUNT)'],
  ])('refuses %j', async (command, message) => {
    await expectFailure(run(queue, command), 'BAD_REQUEST', message);
  });

  it('ACK takes at most 1000 receipts', async () => {
    const receipts = Array.from({ length: 1001 }, (_, i) => `r${i}`);
    await expectFailure(run(queue, ['ACK', ...receipts]), 'BAD_REQUEST', 'wrong number of arguments for ACK');
    expect(await run(queue, ['ACK', ...receipts.slice(1)])).toBe(0);
  });

  it('a refused ENQUEUE adds nothing', async () => {
    await expectFailure(run(queue, ['ENQUEUE', 'x', 'PRIORITY', 1, 'DELAY', 'soon']), 'BAD_REQUEST');
    expect(await run(queue, ['STATS'])).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 0 });
  });
});

describe('queue commandWrites', () => {
  it.each([
    [['PEEK'], false],
    [['stats'], false],
    [['DEAD'], false],
    [['ENQUEUE', 1], true],
    [['DEQUEUE'], true],
    [['dequeue', 'WAIT', 5], true],
    [['ACK', 'r'], true],
    [['NACK', 'r'], true],
    [['EXTEND', 'r', 1], true],
    [['PURGE'], true],
    [['REDRIVE'], true],
    [['GET', 'k'], true],
    [[null], true],
  ])('%j writes: %s', (command, writes) => {
    expect(engine.commandWrites(command)).toBe(writes);
  });
});
