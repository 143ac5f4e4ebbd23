import Sqlite from 'better-sqlite3';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KvStoreEngine } from '../../../../../../../src/services/durable/stores/engines/kv/kv-engine.js';
import type { StoreHandle, StoreTarget } from '../../../../../../../src/services/durable/stores/store-engine.js';
import { silentLogger } from '../../../../../../../src/telemetry/logger.js';
import { EmbeddedStores, expectFailure, run } from '../../../../../../helpers/embedded-store.js';
import { manualClock } from '../../../../../../helpers/manual-clock.js';

let time: ReturnType<typeof manualClock>;
let engine: KvStoreEngine;
let stores: EmbeddedStores;
let target: StoreTarget;
let kv: StoreHandle;

beforeEach(async () => {
  time = manualClock();
  engine = new KvStoreEngine({ clock: time.clock, logger: silentLogger(), sweepSeconds: 0 });
  stores = new EmbeddedStores(engine, 'kv');
  ({ target, handle: kv } = await stores.create());
});

afterEach(async () => {
  await engine.shutdown();
  stores.remove();
});

/** The rows in the store's file, read through a connection of the test's own. */
function rowsOnDisk(file: string): number {
  const db = new Sqlite(file, { readonly: true });
  try {
    return db.prepare('SELECT count(*) FROM kv').pluck().get() as number;
  } finally {
    db.close();
  }
}

/** Every key of a full SCAN, page by page. */
async function scanAll(handle: StoreHandle, ...options: unknown[]): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, page] = (await run(handle, ['SCAN', cursor, ...options])) as [string, string[]];
    keys.push(...page);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

describe('kv config', () => {
  it('fills the defaults', () => {
    expect(engine.checkConfig({})).toEqual({ max_bytes: 268435456, read_only: false });
    expect(engine.checkConfig({ max_bytes: 4096, read_only: true })).toEqual({ max_bytes: 4096, read_only: true });
  });

  it.each([
    [{ max_bytes: '1000' }, 'config.max_bytes: must be an integer between 1024 and'],
    [{ max_bytes: 10 }, 'config.max_bytes'],
    [{ max_bytes: 4096.5 }, 'config.max_bytes'],
    [{ max_bytes: 2 ** 41 }, 'config.max_bytes'],
    [{ read_only: 'yes' }, 'config.read_only: must be true or false'],
    [{ visibility_timeout_seconds: 30 }, 'config.visibility_timeout_seconds: unknown field for a kv store'],
    [{ a: 1, b: 2 }, 'config.a, config.b: unknown fields'],
  ])('refuses %j', (config, message) => {
    expect(() => engine.checkConfig(config)).toThrow(message);
  });
});

describe('kv files', () => {
  it('prepare makes the file, sizeBytes measures it, destroy deletes it with its WAL files', async () => {
    await run(kv, ['SET', 'k', 'v']);
    expect(existsSync(target.file)).toBe(true);
    expect(existsSync(`${target.file}-wal`)).toBe(true);
    expect(await kv.sizeBytes?.()).toBeGreaterThan(0);
    await engine.destroy(target);
    for (const suffix of ['', '-wal', '-shm']) expect(existsSync(target.file + suffix)).toBe(false);
    // destroy closed the handle that was still open.
    await expectFailure(run(kv, ['GET', 'k']), 'STORE_UNAVAILABLE', "kv store 'store1' is closed");
  });

  it('opening a store whose file is missing is 503, not a new empty store', async () => {
    const lost = stores.target({}, 'lost');
    await expectFailure(engine.open(lost), 'STORE_UNAVAILABLE', "kv store 'lost' cannot be opened: its file is missing");
    expect(existsSync(lost.file)).toBe(false);
  });

  it('opening a file that is not a database is 503 naming the store', async () => {
    const broken = stores.target({}, 'broken');
    await engine.prepare(broken);
    writeFileSync(broken.file, 'not a database, not at all, not even close to one'.repeat(100));
    await expectFailure(engine.open(broken), 'STORE_UNAVAILABLE', "kv store 'broken' cannot be opened: file is not a database");
  });

  it('close is idempotent and a closed handle answers 503', async () => {
    await kv.close();
    await kv.close();
    await expectFailure(run(kv, ['GET', 'k']), 'STORE_UNAVAILABLE');
  });

  it('keeps the data across a close and a new open', async () => {
    await run(kv, ['SET', 'k', { a: [1, 2] }]);
    await kv.close();
    const again = await engine.open(target);
    expect(await run(again, ['GET', 'k'])).toEqual({ a: [1, 2] });
  });
});

describe('kv GET, SET, DEL, EXISTS, MGET, MSET', () => {
  const values: unknown[][] = [['text'], [42], [-1.5], [true], [false], [null], [{ nested: { list: [1, 'two', null] } }], [[]], ['']];
  it.each(values)('stores the JSON value %j', async (value) => {
    expect(await run(kv, ['SET', 'k', value])).toBe('OK');
    expect(await run(kv, ['GET', 'k'])).toEqual(value);
    expect(await run(kv, ['EXISTS', 'k'])).toBe(1);
  });

  it('GET of a missing key is null; names and options are case-insensitive', async () => {
    expect(await run(kv, ['get', 'nope'])).toBeNull();
    expect(await run(kv, ['sEt', 'k', 1, 'ex', 10, 'nx'])).toBe('OK');
    expect(await run(kv, ['Ttl', 'k'])).toBe(10);
  });

  it('keys are case-sensitive strings, any characters', async () => {
    await run(kv, ['MSET', 'Key', 1, 'key', 2, 'ключ 🔑', 3, ' ', 4]);
    expect(await run(kv, ['MGET', 'Key', 'key', 'ключ 🔑', ' ', 'KEY'])).toEqual([1, 2, 3, 4, null]);
  });

  it('SET NX writes only a missing key, XX only an existing one', async () => {
    expect(await run(kv, ['SET', 'k', 1, 'XX'])).toBeNull();
    expect(await run(kv, ['GET', 'k'])).toBeNull();
    expect(await run(kv, ['SET', 'k', 1, 'NX'])).toBe('OK');
    expect(await run(kv, ['SET', 'k', 2, 'NX'])).toBeNull();
    expect(await run(kv, ['GET', 'k'])).toBe(1);
    expect(await run(kv, ['SET', 'k', 3, 'XX'])).toBe('OK');
    expect(await run(kv, ['GET', 'k'])).toBe(3);
  });

  it('DEL and EXISTS count keys (a key named twice counts twice in EXISTS, as in Redis)', async () => {
    await run(kv, ['MSET', 'a', 1, 'b', 2]);
    expect(await run(kv, ['EXISTS', 'a', 'a', 'b', 'c'])).toBe(3);
    expect(await run(kv, ['DEL', 'a', 'c', 'a'])).toBe(1);
    expect(await run(kv, ['EXISTS', 'a', 'b'])).toBe(1);
  });

  it('MSET is atomic: a bad pair anywhere writes nothing', async () => {
    await expectFailure(run(kv, ['MSET', 'a', 1, 'b', 2, 7, 3]), 'BAD_REQUEST', 'command: MSET: key must be a string, got 7');
    await expectFailure(run(kv, ['MSET', 'a', 1, 'b', 'x'.repeat(1024 * 1024)]), 'PAYLOAD_TOO_LARGE', "value of 'b'");
    expect(await run(kv, ['DBSIZE'])).toBe(0);
  });
});

describe('kv expiry', () => {
  it('SET EX / PX give a TTL; the key vanishes when it passes', async () => {
    await run(kv, ['SET', 'ex', 1, 'EX', 10]);
    await run(kv, ['SET', 'px', 1, 'PX', '1500']);
    expect(await run(kv, ['TTL', 'ex'])).toBe(10);
    expect(await run(kv, ['TTL', 'px'])).toBe(2);
    time.advance(1.5);
    expect(await run(kv, ['GET', 'px'])).toBeNull();
    expect(await run(kv, ['TTL', 'px'])).toBe(-2);
    expect(await run(kv, ['EXISTS', 'px'])).toBe(0);
    expect(await run(kv, ['TTL', 'ex'])).toBe(9);
    time.advance(8.5);
    expect(await run(kv, ['MGET', 'ex', 'px'])).toEqual([null, null]);
    expect(await run(kv, ['DBSIZE'])).toBe(0);
    expect(await scanAll(kv)).toEqual([]);
  });

  it('an expired key is missing for NX, XX, DEL, EXPIRE and INCR', async () => {
    await run(kv, ['MSET', 'a', 5, 'b', 5, 'c', 5, 'd', 5]);
    for (const key of ['a', 'b', 'c', 'd']) await run(kv, ['EXPIRE', key, 1]);
    time.advance(1);
    expect(await run(kv, ['SET', 'a', 1, 'NX'])).toBe('OK');
    expect(await run(kv, ['TTL', 'a'])).toBe(-1);
    expect(await run(kv, ['SET', 'b', 1, 'XX'])).toBeNull();
    expect(await run(kv, ['DEL', 'c'])).toBe(0);
    expect(await run(kv, ['EXPIRE', 'c', 10])).toBe(0);
    expect(await run(kv, ['INCR', 'd'])).toBe(1);
  });

  it('SET without EX drops the TTL; INCR keeps it', async () => {
    await run(kv, ['SET', 'k', 1, 'EX', 100]);
    await run(kv, ['INCR', 'k']);
    expect(await run(kv, ['TTL', 'k'])).toBe(100);
    await run(kv, ['SET', 'k', 1]);
    expect(await run(kv, ['TTL', 'k'])).toBe(-1);
  });

  it('EXPIRE sets a TTL (1), misses a missing key (0), deletes with a deadline not in the future', async () => {
    await run(kv, ['SET', 'k', 1]);
    expect(await run(kv, ['TTL', 'k'])).toBe(-1);
    expect(await run(kv, ['EXPIRE', 'k', '30'])).toBe(1);
    expect(await run(kv, ['TTL', 'k'])).toBe(30);
    expect(await run(kv, ['EXPIRE', 'missing', 30])).toBe(0);
    expect(await run(kv, ['EXPIRE', 'k', -1])).toBe(1);
    expect(await run(kv, ['EXISTS', 'k'])).toBe(0);
    expect(await run(kv, ['EXPIRE', 'k', 0])).toBe(0);
  });

  it('the sweep deletes expired keys from the file; live ones stay', async () => {
    await run(kv, ['MSET', 'live', 1, 'a', 1, 'b', 1]);
    await run(kv, ['EXPIRE', 'a', 5]);
    await run(kv, ['SET', 'c', 'x', 'PX', 1]);
    for (let i = 0; i < 1200; i++) await run(kv, ['SET', `many:${i}`, i, 'EX', 5]);
    time.advance(5);
    expect(rowsOnDisk(target.file)).toBe(1204);
    await engine.sweep();
    expect(rowsOnDisk(target.file)).toBe(2);
    expect(await run(kv, ['MGET', 'live', 'b'])).toEqual([1, 1]);
  });
});

describe('kv INCR, INCRBY, DECR, DECRBY', () => {
  it('count from 0 on a missing key', async () => {
    expect(await run(kv, ['INCR', 'n'])).toBe(1);
    expect(await run(kv, ['INCRBY', 'n', 10])).toBe(11);
    expect(await run(kv, ['DECR', 'n'])).toBe(10);
    expect(await run(kv, ['DECRBY', 'n', '25'])).toBe(-15);
    expect(await run(kv, ['INCRBY', 'n', -5])).toBe(-20);
    expect(await run(kv, ['GET', 'n'])).toBe(-20);
  });

  it('a string of digits stays a string (what a Redis client stored)', async () => {
    await run(kv, ['SET', 's', '10']);
    expect(await run(kv, ['INCR', 's'])).toBe(11);
    expect(await run(kv, ['GET', 's'])).toBe('11');
  });

  it.each([['abc'], ['1.5'], [1.5], ['01'], [' 1'], [true], [null], [{ n: 1 }], [[1]]])('refuses to count the value %j', async (value) => {
    await run(kv, ['SET', 'v', value]);
    await expectFailure(run(kv, ['INCR', 'v']), 'BAD_REQUEST', "command: INCR: value of 'v' is not an integer or out of range");
    expect(await run(kv, ['GET', 'v'])).toEqual(value);
  });

  it('stays within safe integers: beyond 2^53 is refused, never rounded', async () => {
    await run(kv, ['SET', 'max', Number.MAX_SAFE_INTEGER - 1]);
    expect(await run(kv, ['INCR', 'max'])).toBe(Number.MAX_SAFE_INTEGER);
    await expectFailure(run(kv, ['INCR', 'max']), 'BAD_REQUEST', 'INCR: increment or decrement would overflow');
    expect(await run(kv, ['GET', 'max'])).toBe(Number.MAX_SAFE_INTEGER);
    await run(kv, ['SET', 'min', -Number.MAX_SAFE_INTEGER]);
    await expectFailure(run(kv, ['DECRBY', 'min', 1]), 'BAD_REQUEST', 'would overflow');
    await run(kv, ['SET', 'big', '9007199254740993']);
    await expectFailure(run(kv, ['INCR', 'big']), 'BAD_REQUEST', 'not an integer or out of range');
    await run(kv, ['SET', 'bignum', 2 ** 60]);
    await expectFailure(run(kv, ['DECR', 'bignum']), 'BAD_REQUEST', 'not an integer or out of range');
    await expectFailure(run(kv, ['INCRBY', 'n', '9007199254740992']), 'BAD_REQUEST', 'INCRBY: increment must be an integer between');
  });

  it.each([['x'], [1.5], ['1e3'], [null], [[1]]])('refuses the increment %j', async (amount) => {
    await expectFailure(run(kv, ['INCRBY', 'n', amount]), 'BAD_REQUEST', 'command: INCRBY: increment must be an integer');
    await expectFailure(run(kv, ['DECRBY', 'n', amount]), 'BAD_REQUEST', 'command: DECRBY: decrement must be an integer');
    expect(await run(kv, ['EXISTS', 'n'])).toBe(0);
  });
});

describe('kv SCAN', () => {
  beforeEach(async () => {
    const pairs = ['user:1', 'user:2', 'user:10', 'users', 'order:1', 'order:2', 'a*b', 'a?b', 'axb', 'zeta'].flatMap((key) => [key, key]);
    await run(kv, ['MSET', ...pairs]);
  });

  it('walks every key once, in key order, COUNT at a time', async () => {
    const [cursor, first] = (await run(kv, ['SCAN', 0, 'COUNT', 3])) as [string, string[]];
    expect(first).toEqual(['a*b', 'a?b', 'axb']);
    expect(cursor).not.toBe('0');
    expect(await scanAll(kv, 'COUNT', '3')).toEqual(['a*b', 'a?b', 'axb', 'order:1', 'order:2', 'user:1', 'user:10', 'user:2', 'users', 'zeta']);
    // A page that may not be the last has a cursor other than "0", even when the next page is empty.
    const [more, all] = (await run(kv, ['SCAN', '0'])) as [string, string[]];
    expect(all).toHaveLength(10);
    expect(await run(kv, ['SCAN', more])).toEqual(['0', []]);
    expect(await run(kv, ['SCAN', '0', 'COUNT', 11])).toEqual(['0', all]);
  });

  it.each([
    ['user:*', ['user:1', 'user:10', 'user:2']],
    ['user?', ['users']],
    ['user:?', ['user:1', 'user:2']],
    ['*:1*', ['order:1', 'user:1', 'user:10']],
    ['user:[1-2]', ['user:1', 'user:2']],
    ['user:[^1]', ['user:2']],
    ['a\\*b', ['a*b']],
    ['a[*?]b', ['a*b', 'a?b']],
    ['*', ['a*b', 'a?b', 'axb', 'order:1', 'order:2', 'user:1', 'user:10', 'user:2', 'users', 'zeta']],
    ['nothing*', []],
  ])('MATCH %s', async (pattern, expected) => {
    expect(await scanAll(kv, 'MATCH', pattern, 'COUNT', 2)).toEqual(expected);
  });

  it('a prefix pattern ends the scan past its keys', async () => {
    expect(await run(kv, ['SCAN', '0', 'MATCH', 'order:*', 'COUNT', 100])).toEqual(['0', ['order:1', 'order:2']]);
  });

  it('a pathological pattern is matched without exponential backtracking', async () => {
    await run(kv, ['SET', 'a'.repeat(500), 1]);
    expect(await scanAll(kv, 'MATCH', '*a*a*a*a*a*a*a*a*a*a*a*a*b', 'COUNT', 1000)).toEqual([]);
  });

  it('keys inserted and deleted between pages never make another key appear twice or go missing', async () => {
    const seen: string[] = [];
    let cursor = '0';
    let page = 0;
    do {
      const [next, keys] = (await run(kv, ['SCAN', cursor, 'COUNT', 2])) as [string, string[]];
      seen.push(...keys);
      cursor = next;
      page += 1;
      await run(kv, ['SET', `a${page}`, 1]);
      await run(kv, ['SET', `user:9${page}`, 1]);
      if (page === 2) await run(kv, ['DEL', 'zeta']);
    } while (cursor !== '0');
    const steady = ['a*b', 'a?b', 'axb', 'order:1', 'order:2', 'user:1', 'user:10', 'user:2', 'users'];
    for (const key of steady) expect(seen.filter((k) => k === key)).toHaveLength(1);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it.each([
    [['SCAN', 'abc'], 'command: SCAN: invalid cursor "abc"'],
    [['SCAN', 'k!!'], 'invalid cursor'],
    [['SCAN', 1], 'invalid cursor 1'],
    [['SCAN', '0', 'COUNT', 0], 'SCAN: COUNT must be an integer between 1 and 1000, got 0'],
    [['SCAN', '0', 'COUNT', 1001], 'COUNT must be an integer between 1 and 1000'],
    [['SCAN', '0', 'MATCH', 'a[bc'], "SCAN: MATCH pattern has a '[' without its ']'"],
    [['SCAN', '0', 'MATCH', 5], 'SCAN: MATCH pattern must be a string, got 5'],
    [['SCAN', '0', 'MATCH', 'x'.repeat(129)], 'MATCH pattern is longer than 128 bytes'],
    [['SCAN', '0', 'TYPE', 'string'], 'SCAN: unknown option "TYPE" (options: MATCH, COUNT)'],
    [['SCAN', '0', 'COUNT'], 'SCAN: option COUNT needs a value'],
  ])('refuses %j', async (command, message) => {
    await expectFailure(run(kv, command), 'BAD_REQUEST', message);
  });
});

describe('kv DBSIZE and FLUSHDB', () => {
  it('DBSIZE counts live keys; FLUSHDB empties the store and frees its space', async () => {
    const small = (await stores.create({ max_bytes: 4096 }, 'small')).handle;
    await run(small, ['MSET', 'a', 'x'.repeat(1500), 'b', 'x'.repeat(1500)]);
    await run(small, ['SET', 'c', 1, 'EX', 1]);
    expect(await run(small, ['DBSIZE'])).toBe(3);
    time.advance(1);
    expect(await run(small, ['DBSIZE'])).toBe(2);
    expect(await run(small, ['FLUSHDB'])).toBe('OK');
    expect(await run(small, ['DBSIZE'])).toBe(0);
    expect(await run(small, ['GET', 'a'])).toBeNull();
    await run(small, ['MSET', 'a', 'x'.repeat(1500), 'b', 'x'.repeat(1500)]);
    expect(await run(small, ['DBSIZE'])).toBe(2);
  });
});

describe('kv limits', () => {
  it('a value over 1 MiB as JSON is 413 naming the key; at 1 MiB it is stored', async () => {
    const exact = 'x'.repeat(1024 * 1024 - 2);
    expect(await run(kv, ['SET', 'k', exact])).toBe('OK');
    const message = "command: SET: value of 'k' is 1048577 bytes as JSON, more than 1048576";
    await expectFailure(run(kv, ['SET', 'k', `${exact}y`]), 'PAYLOAD_TOO_LARGE', message);
    expect(await run(kv, ['GET', 'k'])).toBe(exact);
  });

  it('keys are at most 512 bytes', async () => {
    expect(await run(kv, ['SET', 'é'.repeat(256), 1])).toBe('OK');
    await expectFailure(run(kv, ['SET', `${'é'.repeat(256)}x`, 1]), 'BAD_REQUEST', 'command: SET: key is longer than 512 bytes');
  });

  it('a full store is 413; nothing of the refused command is written; deleting makes room', async () => {
    const { handle } = await stores.create({ max_bytes: 4096 }, 'small');
    await run(handle, ['SET', 'a', 'x'.repeat(2000)]);
    await expectFailure(
      run(handle, ['MSET', 'b', 'x'.repeat(1000), 'c', 'x'.repeat(1100)]),
      'PAYLOAD_TOO_LARGE',
      "command: MSET: kv store 'small' is full",
      'more than config.max_bytes (4096)',
    );
    expect(await run(handle, ['MGET', 'b', 'c'])).toEqual([null, null]);
    // Shrinking a value or deleting always passes.
    expect(await run(handle, ['SET', 'a', 'x'.repeat(1900)])).toBe('OK');
    expect(await run(handle, ['DEL', 'a'])).toBe(1);
    expect(await run(handle, ['MSET', 'b', 'x'.repeat(1000), 'c', 'x'.repeat(1100)])).toBe('OK');
  });

  it('keys that expired but were not swept yet make room for a write', async () => {
    const { handle } = await stores.create({ max_bytes: 4096 }, 'small');
    await run(handle, ['SET', 'old', 'x'.repeat(3000), 'EX', 1]);
    await expectFailure(run(handle, ['SET', 'new', 'x'.repeat(3000)]), 'PAYLOAD_TOO_LARGE');
    time.advance(1);
    expect(await run(handle, ['SET', 'new', 'x'.repeat(3000)])).toBe('OK');
  });

  it('a store over a lowered limit can still be emptied', async () => {
    const created = await stores.create({ max_bytes: 8192 }, 'shrunk');
    await run(created.handle, ['SET', 'a', 'x'.repeat(6000)]);
    await created.handle.close();
    const handle = await engine.open({ ...created.target, config: engine.checkConfig({ max_bytes: 2048 }) });
    await expectFailure(run(handle, ['SET', 'b', 1]), 'PAYLOAD_TOO_LARGE');
    expect(await run(handle, ['SET', 'a', 'x'.repeat(3000)])).toBe('OK');
    expect(await run(handle, ['FLUSHDB'])).toBe('OK');
    expect(await run(handle, ['SET', 'b', 1])).toBe('OK');
  });
});

describe('kv bad commands', () => {
  it.each([
    [[], 'command: must be an array whose first element is the command name'],
    [[7, 'k'], 'command: must be an array whose first element is the command name'],
    [[''], 'command name'],
    [['FLUSHALL'], "command: unknown kv command 'FLUSHALL' (kv stores answer GET, SET, DEL"],
    [['ENQUEUE', 'x'], "unknown kv command 'ENQUEUE'"],
    [['GET'], 'command: wrong number of arguments for GET (usage: GET key)'],
    [['GET', 'a', 'b'], 'wrong number of arguments for GET'],
    [['SET', 'k'], 'wrong number of arguments for SET (usage: SET key value [EX seconds | PX milliseconds] [NX | XX])'],
    [['SET', 'k', 1, 'EX', 1, 'NX', 'GET'], 'command: SET: unknown option "GET" (options: EX, PX, NX, XX)'],
    [['DEL'], 'wrong number of arguments for DEL (usage: DEL key [key ...]'],
    [['EXISTS'], 'wrong number of arguments for EXISTS'],
    [['MGET'], 'wrong number of arguments for MGET'],
    [['MSET', 'k'], 'wrong number of arguments for MSET'],
    [['MSET', 'a', 1, 'b'], "command: MSET: a key without its value"],
    [['INCR'], 'wrong number of arguments for INCR'],
    [['INCRBY', 'k'], 'wrong number of arguments for INCRBY (usage: INCRBY key increment)'],
    [['DECR', 'a', 'b'], 'wrong number of arguments for DECR'],
    [['DECRBY', 'k'], 'wrong number of arguments for DECRBY'],
    [['EXPIRE', 'k'], 'wrong number of arguments for EXPIRE (usage: EXPIRE key seconds)'],
    [['EXPIRE', 'k', 10, 'NX'], 'wrong number of arguments for EXPIRE'],
    [['TTL'], 'wrong number of arguments for TTL'],
    [['SCAN'], 'wrong number of arguments for SCAN (usage: SCAN cursor [MATCH pattern] [COUNT count])'],
    [['DBSIZE', 'x'], 'wrong number of arguments for DBSIZE'],
    [['FLUSHDB', 'ASYNC'], 'wrong number of arguments for FLUSHDB'],
    [['GET', 1], 'command: GET: key must be a string, got 1'],
    [['GET', ''], 'command: GET: key must not be empty'],
    [['GET', { a: 1 }], 'GET: key must be a string, got {"a":1}'],
    [['DEL', 'a', null], 'DEL: key must be a string, got null'],
    [['SET', 'k', 1, 'KEEPTTL'], 'command: SET: unknown option "KEEPTTL" (options: EX, PX, NX, XX)'],
    [['SET', 'k', 1, 5], 'SET: unknown option 5'],
    [['SET', 'k', 1, 'EX', 1, 'PX', 1000], 'SET: EX and PX cannot be given together'],
    [['SET', 'k', 1, 'NX', 'XX'], 'SET: NX and XX cannot be given together'],
    [['SET', 'k', 1, 'EX', 1, 'EX', 2], 'SET: option EX given twice'],
    [['SET', 'k', 1, 'EX'], 'SET: option EX needs a value'],
    [['SET', 'k', 1, 'EX', 0], 'SET: EX must be an integer between 1 and 2147483647, got 0'],
    [['SET', 'k', 1, 'EX', 'ten'], 'SET: EX must be an integer between 1 and 2147483647, got "ten"'],
    [['SET', 'k', 1, 'PX', -5], 'SET: PX must be an integer between 1 and'],
    [['SET', 'k', 1, 'EX', 2 ** 31], 'SET: EX must be an integer'],
    [['EXPIRE', 'k', 1.5], 'EXPIRE: seconds must be an integer between -2147483647 and 2147483647, got 1.5'],
  ])('refuses %j', async (command, message) => {
    await expectFailure(run(kv, command), 'BAD_REQUEST', message);
  });

  it('one command takes at most 1000 keys', async () => {
    const keys = (n: number) => Array.from({ length: n }, (_, i) => `k${i}`);
    expect(await run(kv, ['MSET', ...keys(1000).flatMap((key) => [key, 1])])).toBe('OK');
    expect(await run(kv, ['EXISTS', ...keys(1000)])).toBe(1000);
    for (const name of ['DEL', 'EXISTS', 'MGET']) {
      await expectFailure(run(kv, [name, ...keys(1001)]), 'BAD_REQUEST', `wrong number of arguments for ${name} (usage: ${name} key [key ...] (at most 1000 keys))`);
    }
    await expectFailure(run(kv, ['MSET', ...keys(1001).flatMap((key) => [key, 1])]), 'BAD_REQUEST', 'wrong number of arguments for MSET');
    expect(await run(kv, ['DEL', ...keys(1000)])).toBe(1000);
  });

  it('a refused command changes nothing', async () => {
    await run(kv, ['SET', 'k', 'v']);
    await expectFailure(run(kv, ['SET', 'k', 'w', 'EX', 0]), 'BAD_REQUEST');
    expect(await run(kv, ['GET', 'k'])).toBe('v');
    expect(await run(kv, ['TTL', 'k'])).toBe(-1);
  });
});

describe('kv commandWrites', () => {
  it.each([
    [['GET', 'k'], false],
    [['mget', 'k'], false],
    [['EXISTS', 'k'], false],
    [['TTL', 'k'], false],
    [['SCAN', '0'], false],
    [['DBSIZE'], false],
    [['SET', 'k', 1], true],
    [['del', 'k'], true],
    [['MSET', 'k', 1], true],
    [['INCR', 'k'], true],
    [['INCRBY', 'k', 1], true],
    [['DECR', 'k'], true],
    [['DECRBY', 'k', 1], true],
    [['EXPIRE', 'k', 1], true],
    [['FLUSHDB'], true],
    [['FLUSHALL'], true],
    [[], true],
    [[5], true],
  ])('%j writes: %s', (command, writes) => {
    expect(engine.commandWrites(command)).toBe(writes);
  });
});

describe('kv concurrency', () => {
  it('two handles on one store see each other at once, and concurrent INCRs lose nothing', async () => {
    const other = await engine.open(target);
    await run(kv, ['SET', 'k', 'from one']);
    expect(await run(other, ['GET', 'k'])).toBe('from one');
    await Promise.all(Array.from({ length: 100 }, (_, i) => run(i % 2 ? kv : other, ['INCR', 'n'])));
    expect(await run(kv, ['GET', 'n'])).toBe(100);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => run(i % 2 ? kv : other, ['SET', 'race', i, 'NX'])));
    expect(results.filter((r) => r === 'OK')).toHaveLength(1);
    // FLUSHDB makes the table again; the other connection's statements follow.
    await run(kv, ['FLUSHDB']);
    expect(await run(other, ['MGET', 'k', 'n'])).toEqual([null, null]);
    await run(other, ['SET', 'k', 'after']);
    expect(await run(kv, ['GET', 'k'])).toBe('after');
  });

  it('stores are separate files', async () => {
    const { handle } = await stores.create({}, 'other');
    await run(kv, ['SET', 'k', 1]);
    expect(await run(handle, ['GET', 'k'])).toBeNull();
  });

  it('shutdown closes every handle', async () => {
    const other = await engine.open(target);
    await engine.shutdown();
    await expectFailure(run(kv, ['GET', 'k']), 'STORE_UNAVAILABLE');
    await expectFailure(run(other, ['GET', 'k']), 'STORE_UNAVAILABLE');
  });
});
