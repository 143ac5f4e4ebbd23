import { argumentError, DECIMAL, integerArg, parseOptions, serialise, stringArg, type CommandSpec } from '../embedded/command-args.js';
import { compileGlob, cursorAfter, keyOfCursor } from './kv-scan.js';
import type { KvTable } from './kv-table.js';

/**
 * The kv commands: a Redis-compatible subset over JSON values. Each runs inside one SQLite
 * transaction opened by the handle, so a command (MSET with all its keys, INCR's read and
 * write) is atomic against every other caller. Expired keys are absent for all of them.
 */

/** Longest key, in UTF-8 bytes (with MAX_PATTERN_BYTES it bounds the work of a SCAN page). */
export const MAX_KEY_BYTES = 512;
/** Largest value, as JSON text. */
const MAX_VALUE_BYTES = 1024 * 1024;
/** Longest expiry: about 68 years, far beyond any use, so deadlines stay exact in ms. */
const MAX_EXPIRE_SECONDS = 2 ** 31 - 1;
/** SCAN's COUNT: keys looked at per page (default, and most allowed). */
const SCAN_COUNT = 10;
const MAX_SCAN_COUNT = 1000;
/** Keys one DEL, EXISTS, MGET or MSET takes at most: a command's statements stay bounded. */
const MAX_KEYS = 1000;

/** What a command gets: the table, its arguments (after the name) and the time in ms. */
interface KvCall {
  table: KvTable;
  args: unknown[];
  now: number;
}

interface KvCommand extends CommandSpec {
  run(call: KvCall): unknown;
}

const key = (command: string, value: unknown) => stringArg(command, 'key', value, MAX_KEY_BYTES);
const keys = (command: string, values: unknown[]) => values.map((value) => key(command, value));
const parse = (text: string): unknown => JSON.parse(text);
const valueText = (command: string, name: string, value: unknown) => serialise(command, `value of '${name}'`, value, MAX_VALUE_BYTES);

/** The kv commands by upper-case name. */
export const KV_COMMANDS: Record<string, KvCommand> = {
  GET: {
    usage: 'GET key',
    min: 1,
    max: 1,
    writes: false,
    run: ({ table, args, now }) => {
      const row = table.row(key('GET', args[0]), now);
      return row ? parse(row.value) : null;
    },
  },
  SET: {
    usage: 'SET key value [EX seconds | PX milliseconds] [NX | XX]',
    min: 2,
    // Options are checked by name, so that a wrong one is named rather than counted.
    max: Infinity,
    writes: true,
    run: set,
  },
  DEL: {
    usage: `DEL key [key ...] (at most ${MAX_KEYS} keys)`,
    min: 1,
    max: MAX_KEYS,
    writes: true,
    run: ({ table, args, now }) => keys('DEL', args).filter((name) => table.delete(name, now)).length,
  },
  EXISTS: {
    usage: `EXISTS key [key ...] (at most ${MAX_KEYS} keys)`,
    min: 1,
    max: MAX_KEYS,
    writes: false,
    // Like Redis, a key named twice counts twice.
    run: ({ table, args, now }) => keys('EXISTS', args).filter((name) => table.has(name, now)).length,
  },
  MGET: {
    usage: `MGET key [key ...] (at most ${MAX_KEYS} keys)`,
    min: 1,
    max: MAX_KEYS,
    writes: false,
    run: ({ table, args, now }) =>
      keys('MGET', args).map((name) => {
        const row = table.row(name, now);
        return row ? parse(row.value) : null;
      }),
  },
  MSET: {
    usage: `MSET key value [key value ...] (at most ${MAX_KEYS} keys)`,
    min: 2,
    max: 2 * MAX_KEYS,
    writes: true,
    run: ({ table, args }) => {
      if (args.length % 2 !== 0) throw argumentError('MSET', 'a key without its value (usage: MSET key value [key value ...])');
      const pairs: [string, string][] = [];
      for (let i = 0; i < args.length; i += 2) {
        const name = key('MSET', args[i]);
        pairs.push([name, valueText('MSET', name, args[i + 1])]);
      }
      for (const [name, text] of pairs) table.put(name, text, null);
      return 'OK';
    },
  },
  INCR: { usage: 'INCR key', min: 1, max: 1, writes: true, run: (call) => incrementBy('INCR', call, 1) },
  DECR: { usage: 'DECR key', min: 1, max: 1, writes: true, run: (call) => incrementBy('DECR', call, -1) },
  INCRBY: {
    usage: 'INCRBY key increment',
    min: 2,
    max: 2,
    writes: true,
    run: (call) => incrementBy('INCRBY', call, integerArg('INCRBY', 'increment', call.args[1], -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)),
  },
  DECRBY: {
    usage: 'DECRBY key decrement',
    min: 2,
    max: 2,
    writes: true,
    run: (call) => incrementBy('DECRBY', call, -integerArg('DECRBY', 'decrement', call.args[1], -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)),
  },
  EXPIRE: {
    usage: 'EXPIRE key seconds',
    min: 2,
    max: 2,
    writes: true,
    run: ({ table, args, now }) => {
      const name = key('EXPIRE', args[0]);
      const seconds = integerArg('EXPIRE', 'seconds', args[1], -MAX_EXPIRE_SECONDS, MAX_EXPIRE_SECONDS);
      // As in Redis, a deadline that is not in the future deletes the key.
      if (seconds <= 0) return table.delete(name, now) ? 1 : 0;
      return table.expire(name, now + seconds * 1000, now) ? 1 : 0;
    },
  },
  TTL: {
    usage: 'TTL key',
    min: 1,
    max: 1,
    writes: false,
    run: ({ table, args, now }) => {
      const row = table.row(key('TTL', args[0]), now);
      if (!row) return -2;
      if (row.expires_at === null) return -1;
      // Rounded to the nearest second, as Redis does.
      return Math.floor((row.expires_at - now + 500) / 1000);
    },
  },
  SCAN: {
    usage: 'SCAN cursor [MATCH pattern] [COUNT count]',
    min: 1,
    max: 5,
    writes: false,
    run: scan,
  },
  DBSIZE: { usage: 'DBSIZE', min: 0, max: 0, writes: false, run: ({ table, now }) => table.size(now) },
  FLUSHDB: {
    usage: 'FLUSHDB',
    min: 0,
    max: 0,
    writes: true,
    run: ({ table }) => {
      table.flush();
      return 'OK';
    },
  },
};

function set({ table, args, now }: KvCall): 'OK' | null {
  const name = key('SET', args[0]);
  const text = valueText('SET', name, args[1]);
  const options = parseOptions('SET', args.slice(2), { EX: true, PX: true, NX: false, XX: false });
  if (options.has('EX') && options.has('PX')) throw argumentError('SET', 'EX and PX cannot be given together');
  if (options.has('NX') && options.has('XX')) throw argumentError('SET', 'NX and XX cannot be given together');
  let expiresAt: number | null = null;
  if (options.has('EX')) expiresAt = now + integerArg('SET', 'EX', options.get('EX'), 1, MAX_EXPIRE_SECONDS) * 1000;
  if (options.has('PX')) expiresAt = now + integerArg('SET', 'PX', options.get('PX'), 1, MAX_EXPIRE_SECONDS * 1000);
  if (options.has('NX') || options.has('XX')) {
    const exists = table.has(name, now);
    if (exists !== options.has('XX')) return null;
  }
  // Like Redis, SET without EX or PX drops the key's expiry.
  table.put(name, text, expiresAt);
  return 'OK';
}

/**
 * INCR and its kin. The value must be an integer: a JSON number, or a string of decimal digits
 * (what a Redis client stores); the result keeps that type and the key's expiry. Arithmetic
 * stays within JavaScript's safe integers (+-(2^53 - 1)): a value beyond them is "not an
 * integer or out of range" and a result beyond them "would overflow", both 400, never a
 * silently rounded number.
 */
function incrementBy(command: string, { table, args, now }: KvCall, delta: number): number {
  const name = key(command, args[0]);
  const row = table.row(name, now);
  let current = 0;
  let asString = false;
  if (row) {
    const value = parse(row.value);
    if (typeof value === 'string' && DECIMAL.test(value)) {
      current = Number(value);
      asString = true;
    } else if (typeof value === 'number') {
      current = value;
    } else {
      current = Number.NaN;
    }
    if (!Number.isSafeInteger(current)) throw argumentError(command, `value of '${name}' is not an integer or out of range`);
  }
  const next = current + delta;
  if (!Number.isSafeInteger(next)) throw argumentError(command, `increment or decrement would overflow (beyond +-${Number.MAX_SAFE_INTEGER})`);
  table.put(name, JSON.stringify(asString ? String(next) : next), row?.expires_at ?? null);
  return next;
}

/**
 * SCAN: up to COUNT keys looked at per page, in key order from the cursor, of which those
 * that MATCH are returned (a page may be short or empty with a cursor other than "0", as in
 * Redis). A pattern's literal prefix (`user:*`) starts the scan at the prefix and ends it past
 * the last key that has it.
 */
function scan({ table, args, now }: KvCall): [string, string[]] {
  const after = keyOfCursor(args[0]);
  const options = parseOptions('SCAN', args.slice(1), { MATCH: true, COUNT: true });
  const glob = options.has('MATCH') ? compileGlob(options.get('MATCH')) : null;
  const count = options.has('COUNT') ? integerArg('SCAN', 'COUNT', options.get('COUNT'), 1, MAX_SCAN_COUNT) : SCAN_COUNT;
  const prefix = glob?.prefix ?? '';
  // SQLite orders keys by their UTF-8 bytes; compare the same way.
  const fromCursor = after !== null && Buffer.compare(Buffer.from(after), Buffer.from(prefix)) >= 0;
  const rows = fromCursor ? table.keys(after, false, count, now) : table.keys(prefix, true, count, now);
  const found: string[] = [];
  let done = rows.length < count;
  let last = '';
  for (const name of rows) {
    if (!name.startsWith(prefix)) {
      done = true;
      break;
    }
    if (!glob || glob.matches(name)) found.push(name);
    last = name;
  }
  return [done ? '0' : cursorAfter(last), found];
}
