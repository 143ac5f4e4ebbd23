/**
 * The redis store engine against the Redis server on 127.0.0.1:6379. The test writes only
 * keys under its own prefix (random suffix), creates an ACL user with a password, and removes
 * both; it fails, never skips, when the server does not answer.
 */
import net from 'node:net';
import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitCredentials } from '../../src/services/durable/stores/store-credentials.js';
import { RedisEngine } from '../../src/services/durable/stores/engines/redis/redis-engine.js';
import type { StoreHandle } from '../../src/services/durable/stores/store-engine.js';
import { eventually, failure, runSuffix, storeTarget, testPassword, thrown, visible } from '../helpers/store-engines.js';

const suffix = runSuffix();
const P = `sbx:redis:${suffix}:`;
const USER = `sbx_redis_${suffix}`;
const PASSWORD = testPassword();
const DB = 5;
const IDLE_DB = 9;

const engine = new RedisEngine();
const admin = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
const adminDb = createClient({ socket: { host: '127.0.0.1', port: 6379 }, database: DB });
let store: StoreHandle;
const seen: unknown[] = [];

const cmd = (...command: unknown[]) => store.command!({ command, timeoutMs: 5000 });

beforeAll(async () => {
  await admin.connect();
  await adminDb.connect();
  await admin.sendCommand(['ACL', 'SETUSER', USER, 'on', `>${PASSWORD}`, `~${P}*`, '+@all']);
  store = await engine.open(storeTarget(engine, 'redistest', { host: '127.0.0.1' }));
});

afterAll(async () => {
  await store?.close();
  for (const client of [admin, adminDb]) {
    const keys = await client.keys(`${P}*`);
    if (keys.length > 0) await client.del(keys);
  }
  await admin.sendCommand(['ACL', 'DELUSER', USER]);
  await admin.close();
  await adminDb.close();
  for (const outcome of seen) expect(visible(outcome)).not.toContain(PASSWORD);
});

describe('redis config', () => {
  it('fills the defaults, upper-cases allow_commands; a url keeps no password', () => {
    expect(engine.checkConfig({ host: 'cache', db: 2, allow_commands: ['echo'] })).toEqual({
      host: 'cache',
      db: 2,
      allow_commands: ['ECHO'],
      port: 6379,
    });
    const url = { url: `rediss://:${encodeURIComponent(PASSWORD)}@cache:6380/3` };
    expect(engine.checkConfig(url)).toEqual({ url: 'rediss://cache:6380/3' });
    expect(splitCredentials('redis', url).password).toBe(PASSWORD);
  });

  it.each([
    [{ database: 'x' }, 'config.database: unknown field for a redis store'],
    [{ db: -1 }, 'config.db: must be an integer from 0 to 65535'],
    [{ allow_commands: 'ECHO' }, 'config.allow_commands: must be a list'],
    [{ allow_commands: ['ECHO', 'bad name'] }, 'config.allow_commands[1]: must be a redis command name'],
    [{ allow_commands: ['subscribe'] }, `config.allow_commands[0]: 'SUBSCRIBE' cannot be allowed`],
    [{ allow_commands: ['BLPOP'] }, `config.allow_commands[0]: 'BLPOP' cannot be allowed`],
    [{ ssl: true }, 'config.ssl: unknown field for a redis store'],
    [{ url: 'redis://cache/x' }, 'config.url: the path of a redis url is the database number'],
    [{ url: 'redis://cache/1', db: 1 }, 'config.db: give either config.url or the separate connection fields'],
  ])('refuses %j naming the field', (config, message) => {
    const err = thrown(() => engine.checkConfig(config));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toContain(message);
  });

  it('says which commands write, counting unknown ones as writes', () => {
    expect(engine.commandWrites(['get', 'k'])).toBe(false);
    expect(engine.commandWrites(['XRANGE', 's', '-', '+'])).toBe(false);
    expect(engine.commandWrites(['SET', 'k', 'v'])).toBe(true);
    expect(engine.commandWrites(['XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 's', '>'])).toBe(true);
    expect(engine.commandWrites(['NOSUCH'])).toBe(true);
    expect(engine.commandWrites([42])).toBe(true);
  });
});

describe('redis commands', () => {
  it('answers data commands with RESP values as JSON', async () => {
    const value = `it's "quoted" \\ ü`;
    expect(await cmd('SET', `${P}s`, value)).toBe('OK');
    expect(await cmd('get', `${P}s`)).toBe(value);
    expect(await cmd('GET', `${P}missing`)).toBeNull();
    expect(await cmd('INCRBY', `${P}n`, 41)).toBe(41);
    expect(await cmd('INCR', `${P}n`)).toBe(42);
    expect(await cmd('HSET', `${P}h`, 'a', '1', 'b', '2')).toBe(2);
    expect(await cmd('HGETALL', `${P}h`)).toEqual(['a', '1', 'b', '2']);
    expect(await cmd('RPUSH', `${P}l`, 'x', 'y')).toBe(2);
    expect(await cmd('LRANGE', `${P}l`, 0, -1)).toEqual(['x', 'y']);
    expect(await cmd('ZADD', `${P}z`, 1.5, 'm')).toBe(1);
    expect(await cmd('ZRANGE', `${P}z`, 0, -1, 'WITHSCORES')).toEqual(['m', '1.5']);
    const id = await cmd('XADD', `${P}x`, '*', 'f', 'v');
    expect(await cmd('XRANGE', `${P}x`, '-', '+')).toEqual([[id, ['f', 'v']]]);
    expect(await cmd('XREAD', 'COUNT', 1, 'STREAMS', `${P}x`, '0')).toEqual([[`${P}x`, [[id, ['f', 'v']]]]]);
    expect(await cmd('TYPE', `${P}h`)).toBe('hash');
    expect(await cmd('EXPIRE', `${P}h`, 100)).toBe(1);
    expect(await cmd('DEL', `${P}h`, `${P}l`)).toBe(2);
    expect(await cmd('PING')).toBe('PONG');
  });

  it('keeps integers beyond 2^53 exact, as strings', async () => {
    await cmd('SET', `${P}big`, '9007199254740993');
    expect(await cmd('INCR', `${P}big`)).toBe('9007199254740994');
  });

  it('carries binary values as {"$base64": ...} both ways', async () => {
    const bytes = Buffer.from([0, 255, 16, 128]);
    expect(await cmd('SET', `${P}bin`, { $base64: bytes.toString('base64') })).toBe('OK');
    expect(await cmd('GET', `${P}bin`)).toEqual({ $base64: bytes.toString('base64') });
    expect(await cmd('STRLEN', `${P}bin`)).toBe(4);
    expect(Buffer.compare((await admin.sendCommand<Buffer>(['GET', `${P}bin`], { typeMapping: { 36: Buffer } })), bytes)).toBe(0);
  });

  it.each([
    ['CONFIG', 'GET', 'maxmemory'],
    ['FLUSHALL'],
    ['flushdb'],
    ['SHUTDOWN'],
    ['DEBUG', 'SLEEP', '1'],
    ['MODULE', 'LIST'],
    ['ACL', 'LIST'],
    ['CLIENT', 'LIST'],
    ['SELECT', '1'],
    ['MONITOR'],
    ['SUBSCRIBE', 'c'],
    ['PSUBSCRIBE', 'c*'],
    ['REPLICAOF', 'NO', 'ONE'],
    ['SLAVEOF', 'NO', 'ONE'],
    ['MIGRATE', 'h', '1', 'k', '0', '1'],
    ['SAVE'],
    ['BGSAVE'],
    ['SCRIPT', 'FLUSH'],
    ['FUNCTION', 'LIST'],
    ['EVAL', 'return 1', '0'],
    ['EVALSHA', 'abc', '0'],
    ['BLPOP', 'k', '0'],
    ['BRPOP', 'k', '0'],
    ['BLMOVE', 'a', 'b', 'LEFT', 'LEFT', '0'],
    ['BZPOPMIN', 'k', '0'],
    ['WAIT', '1', '0'],
    ['KEYS', '*'],
    ['NOSUCHCOMMAND'],
  ])('refuses %s by name before it reaches the server', async (...command) => {
    const err = await failure(cmd(...command));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toContain(`redis command '${command[0]!.toUpperCase()}'`);
  });

  it('refuses XREAD with BLOCK', async () => {
    const err = await failure(cmd('XREAD', 'BLOCK', 0, 'STREAMS', `${P}x`, '$'));
    expect(err.message).toBe(`command: redis command 'XREAD' with BLOCK is not allowed (it blocks the store's shared connection)`);
  });

  it.each([
    [[], 'command[0]: must be a redis command name'],
    [[42], 'command[0]: must be a redis command name'],
    [['SET', `k`, { a: 1 }], 'command[2]: a redis argument is a string, a number or {"$base64": "..."}'],
    [['SET', `k`, null], 'command[2]: a redis argument'],
    [['SET', `k`, true], 'command[2]: a redis argument'],
    [['SET', `k`, { $base64: 'not base64!' }], 'command[2]: a redis argument'],
  ])('refuses the argv %j naming the element', async (command, message) => {
    const err = await failure(store.command!({ command, timeoutMs: 1000 }));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toContain(message);
  });

  it('reports the server error with its code', async () => {
    await cmd('SET', `${P}text`, 'abc');
    const notInteger = await failure(cmd('INCR', `${P}text`));
    expect(notInteger.code).toBe('SQL_ERROR');
    expect(notInteger.message).toBe('ERR value is not an integer or out of range');
    expect(notInteger.details).toEqual({ engine_code: 'ERR' });
    const wrongType = await failure(cmd('LPUSH', `${P}text`, 'x'));
    expect(wrongType.details).toEqual({ engine_code: 'WRONGTYPE' });
  });

  it('answers the names in config.allow_commands', async () => {
    expect((await failure(cmd('ECHO', 'hi'))).message).toContain(`redis command 'ECHO' is not on the allow-list`);
    const echoing = await engine.open(storeTarget(engine, 'echoing', { host: '127.0.0.1', allow_commands: ['echo'] }));
    expect(await echoing.command!({ command: ['ECHO', 'hi'], timeoutMs: 5000 })).toBe('hi');
    await echoing.close();
  });

  it('selects config.db at connect', async () => {
    const other = await engine.open(storeTarget(engine, 'db5', { host: '127.0.0.1', db: DB }));
    expect(await other.command!({ command: ['SET', `${P}in5`, 'five'], timeoutMs: 5000 })).toBe('OK');
    expect(await adminDb.get(`${P}in5`)).toBe('five');
    expect(await admin.get(`${P}in5`)).toBeNull();
    await other.close();
  });

  it('serves many callers at once over its one connection', async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => cmd('INCR', `${P}many`).then(() => i)));
    expect(replies).toHaveLength(50);
    expect(await cmd('GET', `${P}many`)).toBe('50');
  });
});

describe('redis connections and credentials', () => {
  it('closes its connection when idle and opens it again on the next command', async () => {
    // The store's connection is the only one on its database number.
    const connected = async () => (await admin.sendCommand<string>(['CLIENT', 'LIST'])).includes(` db=${IDLE_DB} `);
    expect(await connected()).toBe(false);
    const idle = await new RedisEngine({ idleMs: 100 }).open(storeTarget(engine, 'idle', { host: '127.0.0.1', db: IDLE_DB }));
    expect(await idle.command!({ command: ['PING'], timeoutMs: 5000 })).toBe('PONG');
    expect(await connected()).toBe(true);
    await eventually(async () => !(await connected()), 'the idle connection is still open');
    expect(await idle.command!({ command: ['PING'], timeoutMs: 5000 })).toBe('PONG');
    await idle.close();
    await eventually(async () => !(await connected()), 'the closed store still has a connection');
  });

  it('answers STORE_UNAVAILABLE naming kind, store, host and port when nothing listens', async () => {
    const down = await engine.open(storeTarget(engine, 'down', { host: '127.0.0.1', port: 1 }));
    const err = await failure(down.command!({ command: ['PING'], timeoutMs: 5000 }));
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`redis store 'down' at 127.0.0.1:1: ECONNREFUSED`);
    await down.close();
    await down.close();
    const closed = await failure(down.command!({ command: ['PING'], timeoutMs: 5000 }));
    expect(closed.code).toBe('STORE_UNAVAILABLE');
  });

  it('checks the connection at create only when asked', async () => {
    const target = storeTarget(engine, 'down', { host: '127.0.0.1', port: 1 });
    const err = await failure(engine.prepare(target, true));
    expect(err.message).toBe('config: cannot connect to redis at 127.0.0.1:1: ECONNREFUSED (create with validate: false to skip this check)');
    await engine.prepare(target, false);
    await engine.prepare(storeTarget(engine, 'up', { host: '127.0.0.1' }), true);
  });

  it('answers STORE_UNAVAILABLE without the password for a wrong password', async () => {
    const wrong = `${PASSWORD}-wrong`;
    const target = storeTarget(engine, 'wrongpw', { host: '127.0.0.1', user: USER }, { password: wrong });
    const handle = await engine.open(target);
    const err = await failure(handle.command!({ command: ['PING'], timeoutMs: 5000 }));
    seen.push(err);
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`redis store 'wrongpw' at 127.0.0.1:6379: WRONGPASS: wrong user or password`);
    expect(visible(err)).not.toContain(wrong);
    const validated = await failure(engine.prepare(target, true));
    expect(validated.message).toMatch(/^config: cannot connect to redis at 127\.0\.0\.1:6379: WRONGPASS/);
    expect(visible(validated)).not.toContain(wrong);
    await handle.close();
  });

  it('connects with the right password and answers what server messages quote as sent, the password like any other word', async () => {
    const url = `redis://${USER}@127.0.0.1:6379/0`;
    const app = await engine.open(storeTarget(engine, 'app', { url, allow_commands: ['NOSUCHCMD'] }, { password: PASSWORD }));
    const reply = await app.command!({ command: ['SET', `${P}app`, 'ok'], timeoutMs: 5000 });
    seen.push(reply);
    expect(reply).toBe('OK');
    const denied = await failure(app.command!({ command: ['GET', 'outside-the-prefix'], timeoutMs: 5000 }));
    expect(denied.details).toEqual({ engine_code: 'NOPERM' });
    const echoed = await failure(app.command!({ command: ['NOSUCHCMD', PASSWORD], timeoutMs: 5000 }));
    expect(echoed.code).toBe('SQL_ERROR');
    expect(echoed.message).not.toContain('****');
    const other = await failure(app.command!({ command: ['NOSUCHCMD', 'not-the-password'], timeoutMs: 5000 }));
    expect(other.message.replace('not-the-password', '<word>')).toBe(echoed.message.replace(PASSWORD, '<word>'));
    await app.close();
  });

  it('answers TIMEOUT at timeout_ms when the server does not answer', async () => {
    // A listener that accepts connections and never says a word: a hung server.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    const hung = await engine.open(storeTarget(engine, 'hung', { host: '127.0.0.1', port, db: 1 }));
    const err = await failure(hung.command!({ command: ['GET', 'k'], timeoutMs: 300 }));
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toBe(`redis: 'GET' did not answer within timeout_ms (300 ms)`);
    const impatient = new RedisEngine({ connectTimeoutMs: 300 });
    const validated = await failure(impatient.prepare(storeTarget(engine, 'hung', { host: '127.0.0.1', port, db: 1 }), true));
    expect(validated.message).toBe(
      `config: cannot connect to redis at 127.0.0.1:${port}: no answer within 300 ms (create with validate: false to skip this check)`,
    );
    await hung.close();
    silent.close();
  });
});
