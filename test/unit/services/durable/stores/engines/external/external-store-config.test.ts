/**
 * The parts of the external store engines that need no server: config checking, where a
 * store connects, scrubbing, JSON values and the redis allow-list. The engines themselves are
 * tested against the real servers (test/integration/*-store-engine.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../../../../src/errors.js';
import { hostPort, resolveEndpoint } from '../../../../../../../src/services/durable/stores/engines/external/external-config.js';
import { connectReason, jsonValue, positionalParams, scrub, withDeadline } from '../../../../../../../src/services/durable/stores/engines/external/external-errors.js';
import { MYSQL_SPEC, MysqlEngine } from '../../../../../../../src/services/durable/stores/engines/mysql/mysql-engine.js';
import { POSTGRES_SPEC, PostgresEngine } from '../../../../../../../src/services/durable/stores/engines/postgres/postgres-engine.js';
import { commandWrites, refusal } from '../../../../../../../src/services/durable/stores/engines/redis/redis-commands.js';
import { REDIS_SPEC, RedisEngine } from '../../../../../../../src/services/durable/stores/engines/redis/redis-engine.js';
import type { StoreEngine } from '../../../../../../../src/services/durable/stores/store-engine.js';
import { storeTarget, thrown } from '../../../../../../helpers/store-engines.js';

const postgres = new PostgresEngine();
const mysql = new MysqlEngine();
const redis = new RedisEngine();

describe('external store config', () => {
  it('treats null as an absent field, so a PATCH can switch from fields to a url', () => {
    expect(postgres.checkConfig({ url: 'postgres://app@db/shop', host: null, port: null, user: null })).toEqual({
      url: 'postgres://app@db/shop',
    });
  });

  it('refuses a host in brackets and a url without a host', () => {
    expect(thrown(() => postgres.checkConfig({ host: '[::1]' })).message).toBe('config.host: must be a host name or an IP address');
    expect(thrown(() => redis.checkConfig({ url: 'redis://:pw@/0' })).message).toMatch(/^config\.url: /);
  });
});

describe('where an external store connects', () => {
  const specs = { postgres: POSTGRES_SPEC, mysql: MYSQL_SPEC, redis: REDIS_SPEC };
  const endpoint = (engine: StoreEngine, config: Record<string, unknown>, extras = {}) =>
    resolveEndpoint(specs[engine.kind as keyof typeof specs], storeTarget(engine, 'x', config, extras));

  it('reads a url: host, port, user, database and the password from the service', () => {
    expect(endpoint(postgres, { url: 'postgres://app:secret@[::1]/my%20db', ssl: 'require' }, { password: 'secret' })).toEqual({ host: '::1', port: 5432, user: 'app', password: 'secret', database: 'my db', tls: { rejectUnauthorized: false } });
    expect(hostPort({ host: '::1', port: 5432 })).toBe('[::1]:5432');
  });

  it('turns TLS on for rediss:// and verifies by default', () => {
    expect(endpoint(redis, { url: 'rediss://cache:6380/2' })).toMatchObject({
      host: 'cache',
      port: 6380,
      database: '2',
      tls: { rejectUnauthorized: true },
    });
    expect(endpoint(redis, { host: 'cache', tls: { ca: 'PEM', reject_unauthorized: false } }).tls).toEqual({
      ca: 'PEM',
      rejectUnauthorized: false,
    });
    expect(endpoint(redis, { host: 'cache', tls: false }).tls).toBeUndefined();
  });

  it("uses the bound sandbox's address when the config has no host", () => {
    expect(endpoint(mysql, { database: 'a' }, { defaultHost: '172.17.0.5' })).toMatchObject({ host: '172.17.0.5', database: 'a' });
    expect(endpoint(mysql, { host: 'db' }, { defaultHost: '172.17.0.5' }).host).toBe('db');
  });
});

describe('external store helpers', () => {
  it('scrubs a password as given and url-encoded', () => {
    expect(scrub('auth p@ss:w and p%40ss%3Aw failed', 'p@ss:w')).toBe('auth **** and **** failed');
    expect(scrub('nothing to hide', undefined)).toBe('nothing to hide');
    expect(connectReason(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:5432'), { code: 'ECONNREFUSED' }), 'x')).toBe(
      'ECONNREFUSED',
    );
    expect(connectReason(new Error('bad secret-pw here'), 'secret-pw')).toBe('bad **** here');
  });

  it('makes driver values JSON-safe', () => {
    expect(
      jsonValue([Buffer.from([1, 2]), new Date('2024-01-02T03:04:05.678Z'), 2n ** 60n, 7n, Infinity, NaN, { a: [Buffer.from('x')] }, undefined]),
    ).toEqual(['AQI=', '2024-01-02T03:04:05.678Z', '1152921504606846976', 7, 'Infinity', 'NaN', { a: ['eA=='] }, null]);
  });

  it("refuses a database's JSON value nested past 64 levels with a 400 saying to select it as text, at any depth", () => {
    const nested = (levels: number): unknown => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);
    expect(jsonValue(nested(64))).toEqual(nested(64));
    for (const levels of [66, 100_000]) {
      expect(() => jsonValue(nested(levels))).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringContaining('nested deeper than 64 levels of arrays and objects: select it as text') }));
    }
  });

  it('sends objects and arrays as JSON text and refuses named parameters', () => {
    expect(positionalParams('postgres', [1, 'a', null, true, [1, 2], { k: 'v' }])).toEqual([1, 'a', null, true, '[1,2]', '{"k":"v"}']);
    expect(thrown(() => positionalParams('mysql', { a: 1 })).message).toBe('params: a mysql store takes positional params (?), not an object');
  });

  it('answers the deadline error at the deadline and tells the work it expired', async () => {
    let sawExpired = false;
    let cancelled = false;
    const late = withDeadline(
      20,
      async (expired) => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        sawExpired = expired();
        return 'late';
      },
      () => {
        cancelled = true;
      },
      () => new ServiceError('TIMEOUT', 'too slow'),
    );
    await expect(late).rejects.toThrow('too slow');
    expect(cancelled).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(sawExpired).toBe(true);
    await expect(withDeadline(1000, async () => 'fast', () => undefined, () => new ServiceError('TIMEOUT', 'x'))).resolves.toBe('fast');
  });
});

describe('redis allow-list', () => {
  it('answers data commands in any case and the names a store allows', () => {
    expect(refusal(['hgetall', 'k'], new Set())).toBeUndefined();
    expect(refusal(['FLUSHDB'], new Set(['FLUSHDB']))).toBeUndefined();
    expect(refusal(['FLUSHDB'], new Set())).toBe(
      `command: redis command 'FLUSHDB' is not allowed (server administration; config.allow_commands can allow it)`,
    );
  });

  it('never answers a command that blocks or changes the shared connection, allowed or not', () => {
    for (const name of ['SELECT', 'MULTI', 'AUTH', 'BLPOP', 'SUBSCRIBE', 'CLIENT']) {
      expect(refusal([name], new Set([name]))).toMatch(/blocks or changes the store's shared connection/);
    }
    expect(refusal(['XREADGROUP', 'GROUP', 'g', 'c', 'block', '10', 'STREAMS', 's', '>'], new Set())).toMatch(/with BLOCK/);
    expect(refusal(['XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 'block', '>'], new Set())).toBeUndefined();
    expect(refusal(['XREAD', 'COUNT', '1', 'STREAMS', 'block', '0'], new Set())).toBeUndefined();
  });

  it('counts every command that is not a known read as a write', () => {
    expect(commandWrites(['scan', '0'])).toBe(false);
    expect(commandWrites(['GETEX', 'k', 'EX', '5'])).toBe(true);
    expect(commandWrites(['FLUSHDB'])).toBe(true);
    expect(commandWrites([])).toBe(true);
  });
});
