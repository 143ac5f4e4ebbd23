/**
 * The postgres store engine against the PostgreSQL server on 127.0.0.1:5432 (user postgres,
 * trust). The test creates its own database and roles with a random suffix and drops them;
 * it fails, never skips, when the server does not answer.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { splitCredentials } from '../../src/services/durable/stores/store-credentials.js';
import { PostgresEngine } from '../../src/services/durable/stores/engines/postgres/postgres-engine.js';
import type { StoreHandle } from '../../src/services/durable/stores/store-engine.js';
import { eventually, failure, PG_AUTH, runSuffix, storeTarget, testPassword, thrown, visible } from '../helpers/store-engines.js';

const suffix = runSuffix();
const DB = `sbx_pg_${suffix}`;
const ROLE = `sbx_pg_app_${suffix}`;
const NOLOGIN = `sbx_pg_nologin_${suffix}`;
const PASSWORD = testPassword();

const engine = new PostgresEngine();
const adminClient = (database: string) => new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database });
/** The test's own connection, inside the test database. */
let admin: pg.Client;
let store: StoreHandle;
/** A store that connects as a role with a password. */
let appStore: StoreHandle;
const seen: unknown[] = [];

const q = (sql: string, params: unknown[] = [], maxRows = 1000, timeoutMs = 10_000) =>
  store.query!({ sql, params, maxRows, timeoutMs });
const exec = (statements: { sql: string; params?: unknown[] }[], transaction = true, maxRows = 1000, timeoutMs = 10_000) =>
  store.execute!({ statements: statements.map((s) => ({ sql: s.sql, params: s.params ?? [] })), transaction, maxRows, timeoutMs });
const count = async (table: string) => (await admin.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n as number;

beforeAll(async () => {
  const server = adminClient('postgres');
  await server.connect();
  await server.query(`CREATE DATABASE ${DB}`);
  await server.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD}'`);
  await server.query(`CREATE ROLE ${NOLOGIN} NOLOGIN PASSWORD '${PASSWORD}'`);
  await server.query(`GRANT ALL ON DATABASE ${DB} TO ${ROLE}`);
  await server.end();
  admin = adminClient(DB);
  await admin.connect();
  await admin.query(`CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL UNIQUE, n int8, data bytea)`);
  await admin.query(`CREATE SEQUENCE counter`);
  await admin.query(
    `CREATE PROCEDURE lift_and_insert() LANGUAGE plpgsql AS $$ BEGIN SET TRANSACTION READ WRITE; INSERT INTO items (name) VALUES ('lifted'); END $$`,
  );
  await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${ROLE}; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${ROLE}`);
  store = await engine.open(storeTarget(engine, 'pgtest', { host: '127.0.0.1', database: DB }));
  appStore = await engine.open(storeTarget(engine, 'pgapp', { host: '127.0.0.1', database: DB, user: ROLE }, { password: PASSWORD }));
});

afterEach(async () => {
  await admin.query('DELETE FROM items');
});

afterAll(async () => {
  await store?.close();
  await appStore?.close();
  await admin?.end().catch(() => undefined);
  const cleanup = adminClient('postgres');
  await cleanup.connect();
  await cleanup.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await cleanup.query(`DROP ROLE IF EXISTS ${ROLE}`);
  await cleanup.query(`DROP ROLE IF EXISTS ${NOLOGIN}`);
  await cleanup.end();
  // Nothing a client could have seen carries the password.
  for (const outcome of seen) expect(visible(outcome)).not.toContain(PASSWORD);
});

describe('postgres config', () => {
  it("fills the defaults; the service's own fields (password, password_env, read_only) never reach it", () => {
    expect(engine.checkConfig({ host: 'db' })).toEqual({ host: 'db', port: 5432, user: 'postgres' });
    expect(thrown(() => engine.checkConfig({ host: 'db', password: PASSWORD })).message).toBe('config.password: unknown field for a postgres store');
  });

  it('keeps a url without its password, which the service takes out and seals', () => {
    const config = { url: `postgres://app:${encodeURIComponent(PASSWORD)}@db.example:6543/shop` };
    expect(engine.checkConfig(config)).toEqual({ url: 'postgres://app@db.example:6543/shop' });
    expect(splitCredentials('postgres', config).password).toBe(PASSWORD);
  });

  it.each([
    [{ hostname: 'db' }, 'config.hostname: unknown field for a postgres store'],
    [{ port: 0 }, 'config.port: must be an integer from 1 to 65535'],
    [{ port: '5432' }, 'config.port: must be an integer from 1 to 65535'],
    [{ host: 'a b' }, 'config.host: must be a host name or an IP address'],
    [{ user: '' }, 'config.user: must be a non-empty string'],
    [{ database: 7 }, 'config.database: must be a non-empty string of at most 63 characters'],
    [{ ssl: 'verify-full' }, 'config.ssl: must be true, false, "require"'],
    [{ ssl: { ca: 'x', verify: true } }, 'config.ssl.verify: unknown field'],
    [{ tls: true }, 'config.tls: unknown field for a postgres store'],
    [{ url: 'mysql://db/x' }, 'config.url: must be a postgres:// or postgresql:// url, not mysql://'],
    [{ url: 'not a url' }, 'config.url: must be a postgres:// or postgresql:// url'],
    [{ url: 'postgres://db/x?sslmode=require' }, 'config.url: query parameters are not supported; use config.ssl'],
    [{ url: 'postgres://db/x', host: 'db' }, 'config.host: give either config.url or the separate connection fields'],
  ])('refuses %j naming the field', (config, message) => {
    const err = thrown(() => engine.checkConfig(config));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toContain(message);
  });

  it('needs a host unless the store is bound to a sandbox, whose address is then the default', async () => {
    const err = await failure(engine.open(storeTarget(engine, 'nohost', {})));
    expect(err.message).toBe('config.host: required for a postgres store that is not bound to a sandbox');
    await engine.prepare(storeTarget(engine, 'bound', { database: DB }, { defaultHost: '127.0.0.1' }), true);
  });
});

describe('postgres reads', () => {
  it('binds parameters: a value with quotes comes back as it went in', async () => {
    const value = `it's "quoted"; DROP TABLE items; --`;
    const result = await q('SELECT $1::text AS echoed, $2::int + 1 AS next, $3::jsonb AS doc, $4::bool AS flag', [
      value,
      41,
      { a: [1, 'x'] },
      true,
    ]);
    expect(result).toEqual({
      columns: ['echoed', 'next', 'doc', 'flag'],
      column_types: ['text', 'int4', 'jsonb', 'bool'],
      rows: [[value, 42, { a: [1, 'x'] }, true]],
      truncated: false,
    });
    expect(await count('items')).toBe(0);
  });

  it('returns big integers and numerics as exact strings, bytes as base64, times as ISO text', async () => {
    const result = await q(
      `SELECT 9007199254740993::int8 AS big, 12345678901234567890.123456789::numeric AS num,
              decode('00ff10', 'hex') AS bytes, '{"k": 1}'::json AS js,
              '2024-02-03 04:05:06.789123+00'::timestamptz AS tz, '2024-02-03 04:05:06'::timestamp AS ts,
              '2024-02-03'::date AS d, ARRAY[1,2]::int4[] AS arr, NULL::text AS nothing,
              ARRAY[['12345678901234567890.5', NULL], ['1', '2']]::numeric[] AS nums,
              ARRAY['2024-02-03 04:05:06.000001']::timestamp[] AS stamps, ARRAY['2024-02-03']::date[] AS dates,
              ARRAY[9007199254740993]::int8[] AS bigs`,
    );
    expect(result.rows).toEqual([
      [
        '9007199254740993',
        '12345678901234567890.123456789',
        Buffer.from([0, 255, 16]).toString('base64'),
        { k: 1 },
        '2024-02-03T04:05:06.789123+00:00',
        '2024-02-03T04:05:06',
        '2024-02-03',
        [1, 2],
        null,
        [
          ['12345678901234567890.5', null],
          ['1', '2'],
        ],
        ['2024-02-03T04:05:06.000001'],
        ['2024-02-03'],
        ['9007199254740993'],
      ],
    ]);
    expect(result.column_types).toEqual([
      'int8', 'numeric', 'bytea', 'json', 'timestamptz', 'timestamp', 'date', '_int4', 'text', '_numeric', '_timestamp', '_date', '_int8',
    ]);
  });

  it('stops reading at max_rows and says the result was truncated', async () => {
    const result = await q('SELECT g FROM generate_series(1, 1000000) AS g', [], 3);
    expect(result.rows).toEqual([[1], [2], [3]]);
    expect(result.truncated).toBe(true);
    const exact = await q('SELECT g FROM generate_series(1, 3) AS g', [], 3);
    expect(exact.truncated).toBe(false);
  });

  it('refuses writes inside the read-only transaction, leaving the table as it was', async () => {
    const insert = await failure(q(`INSERT INTO items (name) VALUES ('sneaky')`));
    expect(insert.code).toBe('READ_ONLY');
    expect(insert).toMatchObject({ message: 'query: statement writes', hint: { action: 'store_execute' } });
    expect(insert.details).toEqual({ engine_code: '25006' });
    const nextval = await failure(q(`SELECT nextval('counter')`));
    expect(nextval.code).toBe('READ_ONLY');
    const cte = await failure(q(`WITH gone AS (DELETE FROM items RETURNING 1) SELECT count(*) FROM gone`));
    expect(cte.code).toBe('READ_ONLY');
    expect((await failure(q('CREATE TABLE sneaky (a int)'))).code).toBe('READ_ONLY');
    // A procedure cannot lift the read-only mode: the transaction has run a query by then.
    const lifted = await failure(q('CALL lift_and_insert()'));
    expect(lifted.code).toBe('SQL_ERROR');
    expect(lifted.message).toBe('transaction read-write mode must be set before any query');
    expect((await failure(q('DROP TABLE items'))).code).toBe('READ_ONLY');
    const tables = await admin.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`);
    expect(tables.rows).toEqual([{ tablename: 'items' }]);
    expect(await count('items')).toBe(0);
    expect((await admin.query(`SELECT last_value, is_called FROM counter`)).rows[0]).toEqual({ last_value: '1', is_called: false });
  });

  it('refuses a stacked second statement through the protocol', async () => {
    await exec([{ sql: `INSERT INTO items (name) VALUES ('kept')` }]);
    const stacked = await failure(q('SELECT 1; DELETE FROM items'));
    expect(stacked.code).toBe('SQL_ERROR');
    expect(stacked.details?.engine_code).toBe('42601');
    expect(stacked.message).toContain('cannot insert multiple commands into a prepared statement');
    expect(await count('items')).toBe(1);
  });

  it('reports an engine error with its SQLSTATE and position', async () => {
    const err = await failure(q('SELECT nope FROM items'));
    expect(err.code).toBe('SQL_ERROR');
    expect(err.message).toBe('column "nope" does not exist');
    expect(err.details).toEqual({ engine_code: '42703', position: 8 });
  });

  it('refuses named parameters, which are a sqlite feature', async () => {
    const err = await failure(store.query!({ sql: 'SELECT 1', params: { a: 1 }, maxRows: 1, timeoutMs: 1000 }));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toBe('params: a postgres store takes positional params ($1, $2, ...), not an object');
  });

  it('serves more calls at once than its pool has connections', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => q('SELECT $1::int * 2, pg_sleep(0.05)', [i])));
    expect(results.map((r) => r.rows[0]![0])).toEqual(Array.from({ length: 12 }, (_, i) => i * 2));
  });
});

describe('postgres writes', () => {
  it('runs a statement with RETURNING and reports its rows', async () => {
    const [result] = await exec([
      {
        sql: 'INSERT INTO items (name, n, data) VALUES ($1, $2, decode($3, $4)), ($5, 2, NULL) RETURNING id, name, n, data',
        params: ['a', '9007199254740993', 'AAEC', 'base64', 'b'],
      },
    ]);
    expect(result).toEqual({
      rows_affected: 2,
      last_insert_id: null,
      result: {
        columns: ['id', 'name', 'n', 'data'],
        column_types: ['int4', 'text', 'int8', 'bytea'],
        rows: [
          [expect.any(Number), 'a', '9007199254740993', 'AAEC'],
          [expect.any(Number), 'b', '2', null],
        ],
        truncated: false,
      },
    });
    const [update] = await exec([{ sql: 'UPDATE items SET n = n + 1 WHERE name IN ($1, $2)', params: ['a', 'b'] }]);
    expect(update).toEqual({ rows_affected: 2, last_insert_id: null });
    const [next] = await exec([{ sql: `SELECT nextval('counter') AS v` }]);
    expect(next!.result!.rows).toEqual([['1']]);
  });

  it('counts every row of a RETURNING statement while returning only max_rows of them', async () => {
    const [result] = await exec([{ sql: `INSERT INTO items (name) SELECT 'r' || g FROM generate_series(1, 2500) g RETURNING name` }], true, 2);
    expect(result!.rows_affected).toBe(2500);
    expect(result!.result!.rows).toEqual([['r1'], ['r2']]);
    expect(result!.result!.truncated).toBe(true);
    expect(await count('items')).toBe(2500);
  });

  it('rolls a batch back when one statement fails', async () => {
    const err = await failure(
      exec([{ sql: `INSERT INTO items (name) VALUES ('first')` }, { sql: `INSERT INTO items (name) VALUES ('first')` }]),
    );
    expect(err.code).toBe('SQL_ERROR');
    expect(err.details).toMatchObject({ engine_code: '23505', statement: 1 });
    expect(await count('items')).toBe(0);
  });

  it('runs each statement alone when transaction is false, keeping those before a failure', async () => {
    const err = await failure(
      exec([{ sql: `INSERT INTO items (name) VALUES ('alone')` }, { sql: `INSERT INTO items (name) VALUES ('alone')` }], false),
    );
    expect(err.details).toMatchObject({ engine_code: '23505', statement: 1 });
    expect(await count('items')).toBe(1);
    // A statement that cannot run inside a transaction block.
    await exec([{ sql: 'VACUUM items' }], false);
  });
});

describe('postgres timeouts', () => {
  const sleeping = async () => {
    const active = await admin.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = $1 AND query LIKE '%pg_sleep(30)%' AND state = 'active' AND pid <> pg_backend_pid()`,
      [DB],
    );
    return active.rows[0].n as number;
  };

  it('answers TIMEOUT for an endless query and the server stops running it', async () => {
    const err = await failure(q('SELECT pg_sleep(30)', [], 10, 500));
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toBe('postgres: the statement was cancelled after timeout_ms (500 ms)');
    // Sooner than the server's own statement_timeout (timeout_ms + 5 s): pg_cancel_backend stopped it.
    await eventually(async () => (await sleeping()) === 0, 'pg_sleep(30) still runs on the server', 4);
  });

  it('answers TIMEOUT for a batch and commits none of it', async () => {
    const err = await failure(exec([{ sql: `INSERT INTO items (name) VALUES ('late')` }, { sql: 'SELECT pg_sleep(30)' }], true, 10, 500));
    expect(err.code).toBe('TIMEOUT');
    await eventually(async () => (await sleeping()) === 0, 'pg_sleep(30) still runs on the server', 4);
    expect(await count('items')).toBe(0);
    // The pool still serves.
    expect((await q('SELECT 1')).rows).toEqual([[1]]);
  });
});

describe('postgres connections and credentials', () => {
  it('answers BUSY when all four connections stay in use past timeout_ms', async () => {
    const holding = Array.from({ length: 4 }, () => q('SELECT pg_sleep(3)'));
    const held = async () =>
      (
        await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query = 'SELECT pg_sleep(3)' AND state = 'active'`,
          [DB],
        )
      ).rows[0].n === 4;
    await eventually(held, 'four pg_sleep(3) are not all running');
    const err = await failure(q('SELECT 1', [], 1, 300));
    expect(err.code).toBe('BUSY');
    expect(err.message).toBe(`postgres store 'pgtest': all 4 connections stayed busy for timeout_ms (300 ms)`);
    await Promise.all(holding);
  });

  it('answers STORE_UNAVAILABLE naming kind, store, host and port when nothing listens', async () => {
    const down = await engine.open(storeTarget(engine, 'down', { host: '127.0.0.1', port: 1, database: DB }));
    const err = await failure(down.query!({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 }));
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`postgres store 'down' at 127.0.0.1:1: ECONNREFUSED`);
    await down.close();
    await down.close();
  });

  it('checks the connection at create only when asked', async () => {
    const target = storeTarget(engine, 'down', { host: '127.0.0.1', port: 1 });
    const err = await failure(engine.prepare(target, true));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toBe(
      'config: cannot connect to postgres at 127.0.0.1:1: ECONNREFUSED (create with validate: false to skip this check)',
    );
    await engine.prepare(target, false);
    await engine.prepare(storeTarget(engine, 'up', { host: '127.0.0.1', database: DB }), true);
  });

  it('answers STORE_UNAVAILABLE without the password when the server refuses the login', async () => {
    // The server trusts 127.0.0.1 (any password is accepted there), so the refusal comes from a role that may not log in.
    const target = storeTarget(engine, 'refused', { host: '127.0.0.1', database: DB, user: NOLOGIN }, { password: PASSWORD });
    const refused = await engine.open(target);
    const err = await failure(refused.query!({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 }));
    seen.push(err);
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`postgres store 'refused' at 127.0.0.1:5432: 28000: the server refused the login (pg_hba.conf, or a role that may not log in)`);
    const validated = await failure(engine.prepare(target, true));
    seen.push(validated);
    expect(validated.message).toContain(`28000: the server refused the login (pg_hba.conf, or a role that may not log in) (create with validate: false`);
    await refused.close();
  });

  it('answers what engine messages quote as the caller sent it, the password like any other word', async () => {
    for (const value of [PASSWORD, 'not-the-password']) {
      const err = await failure(appStore.query!({ sql: 'SELECT $1::int', params: [value], maxRows: 1, timeoutMs: 5000 }));
      expect(err.code).toBe('SQL_ERROR');
      expect(err.message).toBe(`invalid input syntax for type integer: "${value}"`);
    }
    const who = await appStore.query!({ sql: 'SELECT current_user', params: [], maxRows: 1, timeoutMs: 5000 });
    seen.push(who);
    expect(who.rows).toEqual([[ROLE]]);
  });
});

describe('postgres with a server that checks passwords (127.0.0.1:5433, scram-sha-256)', () => {
  const role = `sbx_pg_pw_${suffix}`;
  const authAdmin = new pg.Client({ ...PG_AUTH, database: 'postgres' });

  beforeAll(async () => {
    await authAdmin.connect();
    await authAdmin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}'`);
  });

  afterAll(async () => {
    await authAdmin.query(`DROP ROLE IF EXISTS ${role}`);
    await authAdmin.end();
  });

  const target = (name: string, password: string) =>
    storeTarget(engine, name, { host: '127.0.0.1', port: PG_AUTH.port, user: role, database: 'postgres' }, { password });

  it('connects with the right password', async () => {
    await engine.prepare(target('right', PASSWORD), true);
    const handle = await engine.open(target('right', PASSWORD));
    const who = await handle.query!({ sql: 'SELECT current_user', params: [], maxRows: 1, timeoutMs: 5000 });
    expect(who.rows).toEqual([[role]]);
    await handle.close();
  });

  it('refuses the wrong password with a clear error that does not echo it', async () => {
    const wrong = `${PASSWORD}-wrong`;
    const handle = await engine.open(target('wrongpw', wrong));
    const err = await failure(handle.query!({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 }));
    seen.push(err);
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`postgres store 'wrongpw' at 127.0.0.1:${PG_AUTH.port}: 28P01: password authentication failed`);
    expect(visible(err)).not.toContain(wrong);
    const validated = await failure(engine.prepare(target('wrongpw', wrong), true));
    expect(validated.message).toBe(
      `config: cannot connect to postgres at 127.0.0.1:${PG_AUTH.port}: 28P01: password authentication failed (create with validate: false to skip this check)`,
    );
    expect(visible(validated)).not.toContain(wrong);
    await handle.close();
  });
});
