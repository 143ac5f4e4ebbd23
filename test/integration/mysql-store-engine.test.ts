/**
 * The mysql store engine against the MariaDB server on 127.0.0.1:3306 (root, no password).
 * The test creates its own database and a user with a password (random suffix) and drops
 * them; it fails, never skips, when the server does not answer.
 */
import mysql from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MysqlEngine } from '../../src/services/durable/stores/engines/mysql/mysql-engine.js';
import { splitCredentials } from '../../src/services/durable/stores/store-credentials.js';
import type { StoreHandle } from '../../src/services/durable/stores/store-engine.js';
import { eventually, failure, runSuffix, storeTarget, testPassword, thrown, visible } from '../helpers/store-engines.js';

const suffix = runSuffix();
const DB = `sbx_my_${suffix}`;
const USER = `sbx_my_app_${suffix}`;
const PASSWORD = testPassword();

const engine = new MysqlEngine();
let admin: mysql.Connection;
let store: StoreHandle;
/** A store that connects as a user with a password. */
let appStore: StoreHandle;
const seen: unknown[] = [];

const q = (sql: string, params: unknown[] = [], maxRows = 1000, timeoutMs = 10_000) =>
  store.query!({ sql, params, maxRows, timeoutMs });
const exec = (statements: { sql: string; params?: unknown[] }[], transaction = true, maxRows = 1000, timeoutMs = 10_000) =>
  store.execute!({ statements: statements.map((s) => ({ sql: s.sql, params: s.params ?? [] })), transaction, maxRows, timeoutMs });
const count = async (table: string) => {
  const [rows] = await admin.query(`SELECT COUNT(*) AS n FROM ${table}`);
  return Number((rows as { n: number }[])[0]!.n);
};

beforeAll(async () => {
  admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', multipleStatements: true });
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.query(`CREATE USER '${USER}'@'%' IDENTIFIED BY '${PASSWORD}'`);
  await admin.query(`GRANT ALL ON ${DB}.* TO '${USER}'@'%'`);
  await admin.query(`USE ${DB}`);
  await admin.query(
    `CREATE TABLE items (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(200) NOT NULL UNIQUE, n BIGINT,
       price DECIMAL(30,10), data BLOB, at DATETIME(3)) ENGINE=InnoDB`,
  );
  await admin.query('CREATE SEQUENCE counter');
  await admin.query('CREATE PROCEDURE lift_and_drop() BEGIN SET SESSION tx_read_only = 0; COMMIT; DROP TABLE items; END');
  store = await engine.open(storeTarget(engine, 'mytest', { host: '127.0.0.1', database: DB }));
  appStore = await engine.open(storeTarget(engine, 'myapp', { host: '127.0.0.1', database: DB, user: USER }, { password: PASSWORD }));
});

afterEach(async () => {
  await admin.query('DELETE FROM items');
});

afterAll(async () => {
  await store?.close();
  await appStore?.close();
  await admin.query(`DROP DATABASE IF EXISTS ${DB}`);
  await admin.query(`DROP USER IF EXISTS '${USER}'@'%'`);
  await admin.end();
  for (const outcome of seen) expect(visible(outcome)).not.toContain(PASSWORD);
});

describe('mysql config', () => {
  it('fills the defaults; a url keeps no password', () => {
    expect(engine.checkConfig({ host: 'db', database: 'shop' })).toEqual({
      host: 'db',
      database: 'shop',
      port: 3306,
      user: 'root',
    });
    const url = { url: `mysql://app:${encodeURIComponent(PASSWORD)}@db:3307/shop` };
    expect(engine.checkConfig(url)).toEqual({ url: 'mysql://app@db:3307/shop' });
    expect(splitCredentials('mysql', url).password).toBe(PASSWORD);
  });

  it.each([
    [{ db: 1 }, 'config.db: unknown field for a mysql store'],
    [{ database: '' }, 'config.database: must be a non-empty string'],
    [{ url: 'postgres://db/x' }, 'config.url: must be a mysql:// or mariadb:// url, not postgres://'],
    [{ url: 'mysql://db/x', port: 3306 }, 'config.port: give either config.url or the separate connection fields'],
    [{ ssl: { reject_unauthorized: 'no' } }, 'config.ssl.reject_unauthorized: must be true or false'],
  ])('refuses %j naming the field', (config, message) => {
    const err = thrown(() => engine.checkConfig(config));
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toContain(message);
  });
});

describe('mysql reads', () => {
  it('binds parameters: a value with quotes comes back as it went in', async () => {
    const value = `it's "quoted"; DROP TABLE items; -- \\ done`;
    const result = await q('SELECT ? AS echoed, ? + 1 AS next, ? AS doc', [value, 41, { a: [1, 'x'] }]);
    expect(result.columns).toEqual(['echoed', 'next', 'doc']);
    expect(result.rows).toEqual([[value, 42, '{"a":[1,"x"]}']]);
    expect(result.truncated).toBe(false);
    expect(await count('items')).toBe(0);
  });

  it('returns BIGINT and DECIMAL as exact strings, BLOBs as base64 and DATETIME as ISO text', async () => {
    await admin.query(
      `INSERT INTO items (name, n, price, data, at) VALUES ('a', 9007199254740993, 12345678901234567890.0123456789, X'00ff10', '2024-02-03 04:05:06.789')`,
    );
    const result = await q('SELECT id, n, price, data, at, name FROM items');
    expect(result.rows).toEqual([
      [expect.any(Number), '9007199254740993', '12345678901234567890.0123456789', Buffer.from([0, 255, 16]).toString('base64'), '2024-02-03T04:05:06.789', 'a'],
    ]);
    expect(result.column_types).toEqual(['int', 'bigint', 'decimal', 'blob', 'datetime', 'varchar']);
  });

  it('stops reading at max_rows, says the result was truncated and still serves afterwards', async () => {
    const result = await q('SELECT seq FROM seq_1_to_5000000', [], 3);
    expect(result.rows).toEqual([['1'], ['2'], ['3']]);
    expect(result.truncated).toBe(true);
    const exact = await q('SELECT seq FROM seq_1_to_3', [], 3);
    expect(exact).toMatchObject({ rows: [['1'], ['2'], ['3']], truncated: false });
  });

  it('refuses writes inside the read-only transaction, leaving the table as it was', async () => {
    const insert = await failure(q(`INSERT INTO items (name) VALUES ('sneaky')`));
    expect(insert.code).toBe('READ_ONLY');
    expect(insert).toMatchObject({ message: 'query: statement writes', hint: { action: 'store_execute' } });
    expect(insert.details).toEqual({ engine_code: 1792 });
    const nextval = await failure(q('SELECT NEXTVAL(counter)'));
    expect(nextval.code).toBe('READ_ONLY');
    // DDL commits the read-only transaction implicitly; /query takes only statements with rows.
    for (const sql of [
      'CREATE TABLE sneaky (a INT)',
      'DROP TABLE items',
      'SET STATEMENT tx_read_only=0 FOR CREATE TABLE sneaky (a INT)',
      'SET STATEMENT tx_read_only=0 FOR DROP TABLE items',
      `SELECT 1 INTO OUTFILE '/tmp/sneaky-${suffix}'`,
      // The procedure lifts the session's read-only flag and commits before it writes.
      'CALL lift_and_drop()',
      'SET SESSION tx_read_only = 0',
    ]) {
      const refused = await failure(q(sql));
      expect(refused.code).toBe('READ_ONLY');
      expect(refused.message).toMatch(/^query: (statement writes|the statement returns no rows)$/);
      expect(refused.hint).toEqual({ action: 'store_execute' });
    }
    const [tables] = await admin.query('SHOW TABLES');
    expect((tables as Record<string, string>[]).map((row) => Object.values(row)[0]).sort()).toEqual(['counter', 'items']);
    // The same pooled connections write again through /execute.
    await exec([{ sql: 'CREATE TABLE allowed (a INT)' }, { sql: 'DROP TABLE allowed' }]);
    expect(await count('items')).toBe(0);
    const [rows] = await admin.query('SELECT NEXTVAL(counter) AS v');
    expect((rows as { v: number }[])[0]!.v).toBe(1);
  });

  it('refuses a stacked second statement', async () => {
    await admin.query(`INSERT INTO items (name) VALUES ('kept')`);
    const stacked = await failure(q('SELECT 1; DELETE FROM items'));
    expect(stacked.code).toBe('SQL_ERROR');
    expect(stacked.details).toMatchObject({ engine_code: 1064, sqlstate: '42000' });
    const executed = await failure(exec([{ sql: 'SELECT 1; DELETE FROM items' }]));
    expect(executed.details).toMatchObject({ engine_code: 1064 });
    expect(await count('items')).toBe(1);
  });

  it('answers what the engine warned of beside the rows it gave (REPEAT past max_allowed_packet is NULL)', async () => {
    // Issue 25, item 17: the NULL came without the server's warning.
    const cut = await q('SELECT REPEAT(?, 30000000) AS r', ['a']);
    expect(cut.rows).toEqual([[null]]);
    expect(cut.warnings).toEqual([{ level: 'warning', code: 1301, message: expect.stringMatching(/max_allowed_packet/) }]);
    const plain = await q('SELECT REPEAT(?, 3) AS r', ['a']);
    expect(plain).toMatchObject({ rows: [['aaa']] });
    expect(plain.warnings).toBeUndefined();
    // A statement without rows: INSERT IGNORE of a duplicate warns instead of failing; a SELECT in execute carries its own.
    await exec([{ sql: 'INSERT INTO items (name) VALUES (?)', params: ['dup'] }]);
    const [ignored, selected, clean] = await exec([
      { sql: 'INSERT IGNORE INTO items (name) VALUES (?)', params: ['dup'] },
      { sql: 'SELECT REPEAT(?, 30000000)', params: ['b'] },
      { sql: 'INSERT INTO items (name) VALUES (?)', params: ['new'] },
    ]);
    expect(ignored).toMatchObject({ rows_affected: 0, warnings: [{ level: 'warning', code: 1062, message: expect.stringContaining('Duplicate entry') }] });
    expect(selected!.result).toMatchObject({ rows: [[null]], warnings: [{ code: 1301 }] });
    expect(clean!.warnings).toBeUndefined();
  });

  it('reports an engine error with its errno', async () => {
    const err = await failure(q('SELECT nope FROM items'));
    expect(err.code).toBe('SQL_ERROR');
    expect(err.message).toMatch(/^Unknown column 'nope' in '(SELECT|field list)'$/);
    expect(err.details).toEqual({ engine_code: 1054, sqlstate: '42S22' });
  });

  it('refuses named parameters', async () => {
    const err = await failure(store.query!({ sql: 'SELECT 1', params: { a: 1 }, maxRows: 1, timeoutMs: 1000 }));
    expect(err.message).toBe('params: a mysql store takes positional params (?), not an object');
  });

  it('serves more calls at once than its pool has connections', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => q('SELECT ? * 2 AS v, SLEEP(0.05)', [i])));
    expect(results.map((r) => Number(r.rows[0]![0]))).toEqual(Array.from({ length: 12 }, (_, i) => i * 2));
  });
});

describe('mysql writes', () => {
  it('reports rows affected and the last insert id', async () => {
    const [insert] = await exec([{ sql: 'INSERT INTO items (name, n) VALUES (?, ?), (?, ?)', params: ['a', '9007199254740993', 'b', 2] }]);
    const [[first]] = (await admin.query('SELECT MIN(id) AS id FROM items')) as unknown as [[{ id: number }]];
    expect(insert).toEqual({ rows_affected: 2, last_insert_id: first.id });
    const [update] = await exec([{ sql: 'UPDATE items SET n = n + 1 WHERE name IN (?, ?)', params: ['a', 'b'] }]);
    expect(update).toEqual({ rows_affected: 2, last_insert_id: null });
    expect((await q(`SELECT n FROM items WHERE name = 'a'`)).rows).toEqual([['9007199254740994']]);
  });

  it('returns the rows of INSERT ... RETURNING', async () => {
    const [result] = await exec([{ sql: 'INSERT INTO items (name, data) VALUES (?, FROM_BASE64(?)) RETURNING name, data', params: ['r', 'AAEC'] }]);
    expect(result).toMatchObject({
      rows_affected: 1,
      result: { columns: ['name', 'data'], column_types: ['varchar', 'blob'], rows: [['r', 'AAEC']], truncated: false },
    });
  });

  it('counts every row of a RETURNING statement while returning only max_rows of them', async () => {
    const [result] = await exec([{ sql: `INSERT INTO items (name) SELECT CONCAT('r', seq) FROM seq_1_to_2500 RETURNING name` }], true, 2);
    expect(result!.rows_affected).toBe(2500);
    expect(result!.result).toMatchObject({ rows: [['r1'], ['r2']], truncated: true });
    expect(await count('items')).toBe(2500);
  });

  it('rolls a batch back when one statement fails', async () => {
    const err = await failure(exec([{ sql: `INSERT INTO items (name) VALUES ('first')` }, { sql: `INSERT INTO items (name) VALUES ('first')` }]));
    expect(err.code).toBe('SQL_ERROR');
    expect(err.details).toMatchObject({ engine_code: 1062, statement: 1 });
    expect(await count('items')).toBe(0);
  });

  it('runs each statement alone when transaction is false, keeping those before a failure', async () => {
    const err = await failure(
      exec([{ sql: `INSERT INTO items (name) VALUES ('alone')` }, { sql: `INSERT INTO items (name) VALUES ('alone')` }], false),
    );
    expect(err.details).toMatchObject({ engine_code: 1062, statement: 1 });
    expect(await count('items')).toBe(1);
  });
});

describe('mysql timeouts', () => {
  const sleeping = async () => {
    const [rows] = await admin.query(
      `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%SLEEP(30)%' AND ID <> CONNECTION_ID()`,
    );
    return Number((rows as { n: number }[])[0]!.n);
  };

  it('answers TIMEOUT for an endless query and the server stops running it', async () => {
    const err = await failure(q('SELECT SLEEP(30)', [], 10, 500));
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toBe('mysql: the statement was cancelled after timeout_ms (500 ms)');
    // Sooner than the server's own max_statement_time (timeout_ms + 5 s): KILL QUERY stopped it.
    await eventually(async () => (await sleeping()) === 0, 'SLEEP(30) still runs on the server', 4);
  });

  it('answers TIMEOUT for a batch and commits none of it', async () => {
    const err = await failure(exec([{ sql: `INSERT INTO items (name) VALUES ('late')` }, { sql: 'SELECT SLEEP(30)' }], true, 10, 500));
    expect(err.code).toBe('TIMEOUT');
    await eventually(async () => (await sleeping()) === 0, 'SLEEP(30) still runs on the server', 4);
    expect(await count('items')).toBe(0);
    expect((await q('SELECT 1')).rows).toEqual([[1]]);
  });
});

describe('mysql connections and credentials', () => {
  it('answers BUSY when all four connections stay in use past timeout_ms', async () => {
    const holding = Array.from({ length: 4 }, () => q('SELECT SLEEP(3)'));
    const held = async () => {
      const [rows] = await admin.query(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(3)'`);
      return Number((rows as { n: number }[])[0]!.n) === 4;
    };
    await eventually(held, 'four SLEEP(3) are not all running');
    const err = await failure(q('SELECT 1', [], 1, 300));
    expect(err.code).toBe('BUSY');
    expect(err.message).toBe(`mysql store 'mytest': all 4 connections stayed busy for timeout_ms (300 ms)`);
    await Promise.all(holding);
  });

  it('answers STORE_UNAVAILABLE naming kind, store, host and port when nothing listens', async () => {
    const down = await engine.open(storeTarget(engine, 'down', { host: '127.0.0.1', port: 1 }));
    const err = await failure(down.query!({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 }));
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`mysql store 'down' at 127.0.0.1:1: ECONNREFUSED`);
    await down.close();
    await down.close();
  });

  it('checks the connection at create only when asked', async () => {
    const target = storeTarget(engine, 'down', { host: '127.0.0.1', port: 1 });
    const err = await failure(engine.prepare(target, true));
    expect(err.message).toBe('config: cannot connect to mysql at 127.0.0.1:1: ECONNREFUSED (create with validate: false to skip this check)');
    await engine.prepare(target, false);
    await engine.prepare(storeTarget(engine, 'up', { host: '127.0.0.1', database: DB }), true);
  });

  it('answers STORE_UNAVAILABLE without the password for a wrong password', async () => {
    const wrong = `${PASSWORD}-wrong`;
    const target = storeTarget(engine, 'wrongpw', { host: '127.0.0.1', database: DB, user: USER }, { password: wrong });
    const handle = await engine.open(target);
    const err = await failure(handle.query!({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 }));
    seen.push(err);
    expect(err.code).toBe('STORE_UNAVAILABLE');
    expect(err.message).toBe(`mysql store 'wrongpw' at 127.0.0.1:3306: ER_ACCESS_DENIED_ERROR: access denied: wrong user or password`);
    expect(visible(err)).not.toContain(wrong);
    const validated = await failure(engine.prepare(target, true));
    expect(validated.message).toContain(`ER_ACCESS_DENIED_ERROR: access denied: wrong user or password (create with validate: false`);
    expect(visible(validated)).not.toContain(wrong);
    await handle.close();
  });

  it('connects with the right password and answers what engine messages quote as sent, the password like any other word', async () => {
    const who = await appStore.query!({ sql: 'SELECT CURRENT_USER()', params: [], maxRows: 1, timeoutMs: 5000 });
    seen.push(who);
    expect(who.rows).toEqual([[`${USER}@%`]]);
    const insert = (name: string) =>
      appStore.execute!({
        statements: [{ sql: 'INSERT INTO items (name) VALUES (?)', params: [name] }],
        transaction: true,
        maxRows: 1,
        timeoutMs: 5000,
      });
    await insert(PASSWORD);
    const err = await failure(insert(PASSWORD));
    expect(err.message).toMatch(/^Duplicate entry '(.+)' for key '(.+)'$/);
    await insert('not-the-password');
    const other = await failure(insert('not-the-password'));
    expect(other.message.replace('not-the-password', '<word>')).toBe(err.message.replace(PASSWORD, '<word>'));
  });
});
