import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../../../../../src/paths.js';
import { SqliteStoreEngine } from '../../../../../../../src/services/durable/stores/engines/sqlite/sqlite-engine.js';
import { SqliteHostPool } from '../../../../../../../src/services/durable/stores/engines/sqlite/sqlite-host-pool.js';
import type { StoreHandle, StoreParams, StoreTarget } from '../../../../../../../src/services/durable/stores/store-engine.js';
import { silentLogger } from '../../../../../../../src/telemetry/logger.js';

// The workers run the compiled worker (dist/); a stale build would test yesterday's code.
const WORKER_SOURCES = ['sqlite-worker.ts', 'sqlite-protocol.ts'];

let dir: string;
let engine: SqliteStoreEngine;
let counter = 0;

const noExec = async () => {
  throw new Error('host stores never exec in a sandbox');
};

beforeAll(() => {
  for (const source of WORKER_SOURCES) {
    const built = join(PACKAGE_ROOT, 'dist', 'src', 'services', 'durable', 'stores', 'engines', 'sqlite', source.replace(/\.ts$/, '.js'));
    const src = join(PACKAGE_ROOT, 'src', 'services', 'durable', 'stores', 'engines', 'sqlite', source);
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(src).mtimeMs) throw new Error(`${built} is missing or older than ${src}: run npm run build`);
  }
  dir = mkdtempSync(join(tmpdir(), 'sqlite-store-'));
  engine = new SqliteStoreEngine({ workers: 2, exec: noExec, logger: silentLogger() });
});
afterAll(async () => {
  await engine?.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

/** A new prepared store with its handle. */
async function newStore(config: Record<string, unknown> = {}, on: SqliteStoreEngine = engine): Promise<{ target: StoreTarget; store: StoreHandle }> {
  counter += 1;
  const target: StoreTarget = {
    id: `s${counter}`,
    name: `store-${counter}`,
    kind: 'sqlite',
    config: on.checkConfig(config),
    file: join(dir, 'stores', `s${counter}-${Date.now()}.sqlite`),
  };
  await on.prepare(target, true);
  return { target, store: await on.open(target) };
}

const query = (store: StoreHandle, sql: string, params: StoreParams = [], extra: { maxRows?: number; timeoutMs?: number } = {}) =>
  store.query!({ sql, params, maxRows: extra.maxRows ?? 10_000, timeoutMs: extra.timeoutMs ?? 10_000 });
const execute = (store: StoreHandle, statements: { sql: string; params?: StoreParams }[], extra: { transaction?: boolean; timeoutMs?: number } = {}) =>
  store.execute!({
    statements: statements.map((s) => ({ sql: s.sql, params: s.params ?? [] })),
    transaction: extra.transaction ?? true,
    maxRows: 10_000,
    timeoutMs: extra.timeoutMs ?? 10_000,
  });
const failure = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (err) {
    return err as { code: string; message: string; details?: Record<string, unknown> };
  }
  throw new Error('expected a failure');
};
const count = async (store: StoreHandle, table = 't') => (await query(store, `SELECT count(*) FROM ${table}`)).rows[0]![0];
const ENDLESS = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

/** The worker processes of this test process. */
const workerPids = (): number[] =>
  execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('sqlite-worker.js'))
    .map((line) => Number(line.trim().split(/\s+/)[0]));

describe('config', () => {
  it('normalises a config and refuses bad fields by name', () => {
    expect(engine.checkConfig({})).toEqual({ max_bytes: 256 * 1024 * 1024 });
    expect(engine.checkConfig({ max_bytes: 1048576, read_only: true, path: '/workspace/app.db' })).toEqual({
      max_bytes: 1048576,
      read_only: true,
      path: '/workspace/app.db',
    });
    expect(() => engine.checkConfig({ host: 'x' })).toThrow('config.host: unknown field; a sqlite store takes max_bytes, path, read_only');
    expect(() => engine.checkConfig({ max_bytes: 10 })).toThrow(/^config\.max_bytes: must be a whole number of bytes from 65536/);
    expect(() => engine.checkConfig({ max_bytes: '1mb' })).toThrow(/^config\.max_bytes/);
    expect(() => engine.checkConfig({ max_bytes: 1.5e6 + 0.5 })).toThrow(/^config\.max_bytes/);
    expect(() => engine.checkConfig({ path: 'relative.db' })).toThrow(/^config\.path: must be the absolute path/);
    expect(() => engine.checkConfig({ path: '/dir/' })).toThrow(/^config\.path/);
    expect(() => engine.checkConfig({ path: '/a\0b' })).toThrow(/^config\.path/);
    expect(() => engine.checkConfig({ read_only: 'yes' })).toThrow('config.read_only: must be true or false');
  });

  it('refuses a path on a store without a sandbox', async () => {
    const target: StoreTarget = { id: 'p', name: 'p', kind: 'sqlite', config: { max_bytes: 1 << 20, path: '/x.db' }, file: join(dir, 'p.sqlite') };
    await expect(engine.prepare(target, true)).rejects.toThrow(/^config\.path: only a store bound to a sandbox has a path/);
    await expect(engine.open(target)).rejects.toThrow(/^config\.path/);
    expect(existsSync(target.file)).toBe(false);
  });
});

describe('files', () => {
  it('prepare makes a WAL file, sizeBytes counts it, destroy removes it with its -wal and -shm', async () => {
    const { target, store } = await newStore();
    expect(existsSync(target.file)).toBe(true);
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT)' }]);
    expect((await query(store, 'PRAGMA journal_mode')).rows).toEqual([['wal']]);
    expect(existsSync(`${target.file}-wal`)).toBe(true);
    expect(await store.sizeBytes!()).toBeGreaterThan(4096);
    await store.close();
    await store.close();
    await engine.destroy(target);
    for (const suffix of ['', '-wal', '-shm']) expect(existsSync(target.file + suffix)).toBe(false);
  });
});

describe('query and execute', () => {
  it('binds positional and named params, converts booleans and objects, returns typed columns', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, flag INTEGER, doc TEXT, score REAL)' }]);
    const [inserted] = await execute(store, [{ sql: 'INSERT INTO t (name, flag, doc, score) VALUES (?, ?, ?, ?)', params: ["o'brien; DROP TABLE t", true, { a: [1, 2] }, 1.5] }]);
    expect(inserted).toEqual({ rows_affected: 1, last_insert_id: 1 });
    await execute(store, [{ sql: 'INSERT INTO t (name, flag, doc) VALUES (:name, @flag, $doc)', params: { name: 'b', '@flag': false, $doc: [true] } }]);
    expect(await query(store, 'SELECT id, name, flag, doc, score FROM t ORDER BY id')).toEqual({
      columns: ['id', 'name', 'flag', 'doc', 'score'],
      column_types: ['integer', 'text', 'integer', 'text', 'real'],
      rows: [
        [1, "o'brien; DROP TABLE t", 1, '{"a":[1,2]}', 1.5],
        [2, 'b', 0, '[true]', null],
      ],
      truncated: false,
    });
    expect((await query(store, 'SELECT name FROM t WHERE name = :n', { n: 'b' })).rows).toEqual([['b']]);
    expect((await query(store, 'SELECT ?, ?', [null, 'x'])).rows).toEqual([[null, 'x']]);
  });

  it('answers params that do not fit the statement 400 naming params', async () => {
    const { store } = await newStore();
    expect(await failure(query(store, 'SELECT ?', [1, 2]))).toMatchObject({ code: 'BAD_REQUEST', message: 'params: Too many parameter values were provided' });
    expect(await failure(query(store, 'SELECT :a', { b: 1 }))).toMatchObject({ code: 'BAD_REQUEST', message: 'params: Missing named parameter "a"' });
    expect(await failure(execute(store, [{ sql: 'SELECT 1' }, { sql: 'SELECT ?' }]))).toMatchObject({ code: 'BAD_REQUEST', message: /^statements\[1\]\.params: / });
  });

  it('refuses writes through query, by the engine; the table is unchanged', async () => {
    const { target, store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT)' }, { sql: "INSERT INTO t VALUES ('keep')" }]);
    for (const sql of ["INSERT INTO t VALUES ('x')", 'DELETE FROM t', 'UPDATE t SET v = 1', 'DROP TABLE t', 'CREATE TABLE u (x)', 'PRAGMA user_version = 5', "WITH a AS (SELECT 1) INSERT INTO t VALUES ('x')", 'DELETE FROM t RETURNING *']) {
      expect(await failure(query(store, sql)), sql).toMatchObject({ code: 'READ_ONLY', message: 'query: statement writes', hint: { action: 'store_execute', store: target.name } });
    }
    expect(await query(store, 'SELECT v FROM t')).toMatchObject({ rows: [['keep']] });
  });

  it('refuses stacked statements in query and execute; nothing of them runs', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT)' }, { sql: "INSERT INTO t VALUES ('keep')" }]);
    for (const sql of ['SELECT 1; DELETE FROM t', 'SELECT 1;DELETE FROM t;', "SELECT ';'; DELETE FROM t", 'SELECT 1 /* ; */ ; -- x\n DELETE FROM t']) {
      expect(await failure(query(store, sql)), sql).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: holds more than one statement/ });
      expect(await failure(execute(store, [{ sql }])), sql).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: holds more than one statement/ });
    }
    expect(await count(store)).toBe(1);
    // A trailing semicolon and comments are one statement.
    expect((await query(store, 'SELECT 1; -- done\n')).rows).toEqual([[1]]);
  });

  it('runs a batch in one transaction, or each statement alone; errors carry the engine code', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT UNIQUE)' }]);
    const err = await failure(execute(store, [{ sql: "INSERT INTO t VALUES ('a')" }, { sql: "INSERT INTO t VALUES ('a')" }]));
    expect(err).toMatchObject({
      code: 'SQL_ERROR',
      message: 'statements[1]: UNIQUE constraint failed: t.v',
      details: { engine_code: 'SQLITE_CONSTRAINT_UNIQUE', statement: 1 },
    });
    expect(await count(store)).toBe(0);
    await failure(execute(store, [{ sql: "INSERT INTO t VALUES ('a')" }, { sql: "INSERT INTO t VALUES ('a')" }], { transaction: false }));
    expect(await count(store)).toBe(1);
    expect(await failure(execute(store, [{ sql: 'SELEC 1' }]))).toMatchObject({ code: 'SQL_ERROR', message: 'near "SELEC": syntax error', details: { engine_code: 'SQLITE_ERROR' } });
    expect(await failure(query(store, 'SELECT nope FROM t'))).toMatchObject({ code: 'SQL_ERROR', message: 'no such column: nope' });
  });

  it('reports rows_affected and last_insert_id per statement, and RETURNING rows', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)' }]);
    const results = await execute(store, [
      { sql: "INSERT INTO t (v) VALUES ('a'), ('b'), ('c')" },
      { sql: "UPDATE t SET v = 'z' WHERE id > 1" },
      { sql: 'CREATE INDEX i ON t (v)' },
      { sql: "INSERT INTO t (v) VALUES ('d') RETURNING id, v" },
      { sql: 'SELECT count(*) FROM t' },
    ]);
    expect(results).toEqual([
      { rows_affected: 3, last_insert_id: 3 },
      { rows_affected: 2, last_insert_id: null },
      { rows_affected: 0, last_insert_id: null },
      { rows_affected: 1, last_insert_id: 4, result: { columns: ['id', 'v'], column_types: ['integer', 'text'], rows: [[4, 'd']], truncated: false } },
      { rows_affected: 0, last_insert_id: null, result: { columns: ['count(*)'], column_types: ['integer'], rows: [[4]], truncated: false } },
    ]);
  });

  it('keeps integers beyond 2^53 exact as strings, both ways', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER)' }]);
    const [big] = await execute(store, [{ sql: 'INSERT INTO t (id, n) VALUES (?, ?)', params: ['9223372036854775807', '-9007199254740993'] }]);
    expect(big).toEqual({ rows_affected: 1, last_insert_id: '9223372036854775807' });
    expect(await query(store, 'SELECT id, n, n + 1, 9007199254740991 FROM t')).toMatchObject({
      column_types: ['integer', 'integer', 'integer', 'integer'],
      rows: [['9223372036854775807', '-9007199254740993', '-9007199254740992', 9007199254740991]],
    });
    expect((await query(store, 'SELECT typeof(?), typeof(?)', [42, 4.5])).rows).toEqual([['integer', 'real']]);
  });

  it('returns BLOBs as base64 with column type blob', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (b BLOB)' }, { sql: "INSERT INTO t VALUES (x'00ff10'), (zeroblob(3)), (NULL)" }]);
    expect(await query(store, 'SELECT b, length(b) FROM t')).toEqual({
      columns: ['b', 'length(b)'],
      column_types: ['blob', 'integer'],
      rows: [
        ['AP8Q', 3],
        ['AAAA', 3],
        [null, null],
      ],
      truncated: false,
    });
  });

  it('truncates huge results at max_rows and at the 8 MiB cap', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (n INTEGER)' }, { sql: 'INSERT INTO t WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT x FROM c' }]);
    const some = await query(store, 'SELECT n FROM t ORDER BY n', [], { maxRows: 100 });
    expect(some.rows).toHaveLength(100);
    expect(some.truncated).toBe(true);
    const all = await query(store, 'SELECT n FROM t', [], { maxRows: 5000 });
    expect(all.rows).toHaveLength(5000);
    expect(all.truncated).toBe(false);
    // 1,000,000 rows of 1 KiB would be a GiB: the answer stops at 8 MiB.
    const wide = await query(store, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x, printf('%.1024c', 'a') FROM c`, [], { maxRows: 100_000 });
    expect(wide.truncated).toBe(true);
    expect(wide.rows.length).toBeGreaterThan(1000);
    expect(JSON.stringify(wide.rows).length).toBeLessThanOrEqual(8 * 1024 * 1024);
  });
});

describe('hardening', () => {
  it('refuses ATTACH, DETACH and VACUUM INTO in both routes; no file appears', async () => {
    const { store } = await newStore();
    const outside = join(dir, 'outside.db');
    for (const sql of [
      `ATTACH '${outside}' AS o`,
      `/* x */ attach\n'${outside}' as o`,
      `-- c\nEXPLAIN ATTACH '${outside}' AS o`,
      `EXPLAIN QUERY PLAN ATTACH '${outside}' AS o`,
      `  (ATTACH '${outside}' AS o)`,
      `VACUUM INTO '${outside}'`,
      `vacuum main /* */ into '${outside}'`,
      'DETACH o',
    ]) {
      expect(await failure(query(store, sql)), sql).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: (ATTACH|DETACH|VACUUM INTO) is not allowed on a host sqlite store/ });
      expect(await failure(execute(store, [{ sql: 'SELECT 1' }, { sql }])), sql).toMatchObject({ code: 'BAD_REQUEST', message: /^statements\[1\]\.sql: / });
    }
    expect(existsSync(outside)).toBe(false);
    expect(await execute(store, [{ sql: 'VACUUM' }])).toEqual([{ rows_affected: 0, last_insert_id: null }]);
  });

  it('allows the listed pragmas only', async () => {
    const { store } = await newStore();
    await execute(store, [{ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)' }, { sql: 'CREATE INDEX tv ON t (v)' }, { sql: 'PRAGMA user_version = 7' }]);
    expect((await query(store, 'PRAGMA user_version')).rows).toEqual([[7]]);
    expect((await query(store, 'PRAGMA foreign_keys')).rows).toEqual([[1]]);
    expect((await query(store, 'PRAGMA table_info(t)')).rows.map((row) => row[1])).toEqual(['id', 'v']);
    expect((await query(store, "SELECT name FROM pragma_index_list('t')")).rows).toEqual([['tv']]);
    for (const sql of ['PRAGMA database_list', 'PRAGMA journal_mode = DELETE', 'SELECT * FROM pragma_database_list', "SELECT file FROM 'pragma_database_list'", 'PRAGMA writable_schema = ON']) {
      expect(await failure(query(store, sql)), sql).toMatchObject({ code: 'BAD_REQUEST' });
      expect(await failure(execute(store, [{ sql }])), sql).toMatchObject({ code: 'BAD_REQUEST' });
    }
    expect((await query(store, 'PRAGMA journal_mode')).rows).toEqual([['wal']]);
  });

  it('keeps load_extension off and has no file functions', async () => {
    const { store } = await newStore();
    expect(await failure(query(store, "SELECT load_extension('/tmp/x.so')"))).toMatchObject({ code: 'SQL_ERROR', message: 'not authorized' });
    expect(await failure(query(store, "SELECT readfile('/etc/passwd')"))).toMatchObject({ code: 'SQL_ERROR', message: 'no such function: readfile' });
  });

  it('refuses transaction control: the store runs its own transactions', async () => {
    const { store } = await newStore();
    expect(await failure(execute(store, [{ sql: 'BEGIN' }]))).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: BEGIN is not allowed/ });
    expect(await failure(query(store, 'COMMIT'))).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: COMMIT is not allowed/ });
  });

  it('answers a full store 413 and keeps it readable', async () => {
    const { store } = await newStore({ max_bytes: 256 * 1024 });
    await execute(store, [{ sql: 'CREATE TABLE t (b BLOB)' }, { sql: 'INSERT INTO t VALUES (zeroblob(100000))' }]);
    const err = await failure(execute(store, [{ sql: 'INSERT INTO t VALUES (zeroblob(400000))' }]));
    expect(err).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', message: /^sqlite store 'store-\d+' is full \(config\.max_bytes\): database or disk is full/, details: { engine_code: 'SQLITE_FULL' } });
    expect(await count(store)).toBe(1);
  });
});

describe('worker processes', () => {
  it('answers an endless query 504 at its deadline without blocking the event loop; other stores keep working', async () => {
    const { store: stuck } = await newStore();
    const { store: other } = await newStore();
    let last = Date.now();
    let longestGap = 0;
    const ticker = setInterval(() => {
      longestGap = Math.max(longestGap, Date.now() - last);
      last = Date.now();
    }, 20);
    try {
      const started = Date.now();
      const endless = failure(query(stuck, ENDLESS, [], { timeoutMs: 1500 }));
      // The other worker answers the other store meanwhile.
      expect((await query(other, 'SELECT 42')).rows).toEqual([[42]]);
      const err = await endless;
      const elapsed = Date.now() - started;
      expect(err).toMatchObject({ code: 'TIMEOUT', message: /^sqlite store 'store-\d+': the statement did not finish within 1500 ms and was stopped$/ });
      expect(elapsed).toBeGreaterThanOrEqual(1490);
      expect(elapsed).toBeLessThan(1500 + 1500);
      expect(longestGap).toBeLessThan(1000);
    } finally {
      clearInterval(ticker);
    }
    // The killed worker was replaced: the store answers again.
    expect((await query(stuck, 'SELECT 1')).rows).toEqual([[1]]);
  });

  it('times out a request still waiting for a worker', async () => {
    const solo = new SqliteStoreEngine({ workers: 1, exec: noExec, logger: silentLogger() });
    try {
      const { store } = await newStore({}, solo);
      const endless = failure(query(store, ENDLESS, [], { timeoutMs: 3000 }));
      const waiting = await failure(query(store, 'SELECT 1', [], { timeoutMs: 300 }));
      expect(waiting).toMatchObject({ code: 'TIMEOUT', message: /within 300 ms/ });
      expect(await endless).toMatchObject({ code: 'TIMEOUT' });
      expect((await query(store, 'SELECT 2')).rows).toEqual([[2]]);
    } finally {
      await solo.shutdown();
    }
  });

  it("gives a store with nothing running a worker on demand while another store's runaways hold every worker, up to four per worker", async () => {
    // Issue 25, item 17: two runaway statements of one store took both workers and every other store timed out.
    const pool = new SqliteHostPool(1, silentLogger(), undefined, 300);
    const [a, b, c, d, e, f] = await Promise.all(Array.from({ length: 6 }, () => newStore()));
    const ask = (target: StoreTarget, sql: string, timeoutMs: number) =>
      pool
        .run({ op: 'query', file: target.file, maxBytes: 1 << 30, sql, params: [], maxRows: 10, pragmaRead: false }, { timeoutMs, label: `sqlite store '${target.name}'` })
        .then(
          (answer) => answer,
          (err: { code: string; message: string }) => err,
        );
    try {
      const runaways = [ask(a!.target, ENDLESS, 8_000)];
      // The runaway's own store waits for a free worker; another store is answered beside it.
      expect(await ask(a!.target, 'SELECT 1', 300)).toMatchObject({ code: 'TIMEOUT', message: /within 300 ms/ });
      expect(await ask(b!.target, 'SELECT 7', 8_000)).toEqual({ id: expect.any(Number), ok: true, value: expect.objectContaining({ rows: [[7]] }) });
      // Up to four workers for a pool of one (the one that answered b is idle or gone): a fifth store waits.
      runaways.push(...[c, d, e].map((store) => ask(store!.target, ENDLESS, 8_000)));
      expect(pool.size).toBe(4);
      expect(await ask(f!.target, 'SELECT 1', 300)).toMatchObject({ code: 'TIMEOUT', message: /within 300 ms/ });
      for (const outcome of await Promise.all(runaways)) expect(outcome).toMatchObject({ code: 'TIMEOUT' });
      // The workers on demand go when their statements are killed; the base worker is replaced.
      await expect.poll(() => pool.size).toBe(1);
      expect(await ask(f!.target, 'SELECT 8', 8_000)).toMatchObject({ ok: true, value: { rows: [[8]] } });
      // One that answered goes after its idle time, while the base worker still runs a runaway.
      const held = ask(a!.target, ENDLESS, 30_000);
      expect(await ask(b!.target, 'SELECT 9', 8_000)).toMatchObject({ ok: true, value: { rows: [[9]] } });
      expect(pool.size).toBe(2);
      await expect.poll(() => pool.size, { timeout: 5_000 }).toBe(1);
      await pool.shutdown();
      expect(await held).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    } finally {
      await pool.shutdown();
    }
  });

  it('answers the request of a worker that crashed and starts a new one', async () => {
    const { store } = await newStore();
    await query(store, 'SELECT 1');
    const before = workerPids();
    const running = failure(query(store, ENDLESS, [], { timeoutMs: 30_000 }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const pid of before) process.kill(pid, 'SIGKILL');
    expect(await running).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: /^sqlite store 'store-\d+': the worker process running the statement exited \(SIGKILL\); a new one was started/,
    });
    expect((await query(store, 'SELECT 3')).rows).toEqual([[3]]);
    expect(workerPids().some((pid) => before.includes(pid))).toBe(false);
  });

  it('offers the workers, not the server, to the OOM killer first', async () => {
    const { store } = await newStore();
    await query(store, 'SELECT 1');
    expect(workerPids().length).toBeGreaterThan(0);
    // A worker writes it as it starts: one the pool has just (re)spawned may still be loading.
    const scores = () => workerPids().map((pid) => readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8').trim());
    await expect.poll(() => scores().every((score) => score === '1000'), { timeout: 10_000 }).toBe(true);
  });

  it('keeps at most 32 stores open per worker', async () => {
    const stores = await Promise.all(Array.from({ length: 40 }, () => newStore()));
    for (const { store } of stores) await query(store, 'SELECT 1');
    let total = 0;
    for (const pid of workerPids()) {
      const files = new Set(
        readdirSync(`/proc/${pid}/fd`)
          .map((fd) => {
            try {
              return readlinkSync(`/proc/${pid}/fd/${fd}`);
            } catch {
              return '';
            }
          })
          .filter((target) => target.startsWith(dir) && target.endsWith('.sqlite')),
      );
      expect(files.size).toBeLessThanOrEqual(32);
      total += files.size;
    }
    expect(total).toBeGreaterThanOrEqual(32);
    for (const { store } of stores.slice(0, 3)) expect((await query(store, 'SELECT 5')).rows).toEqual([[5]]);
  });

  it('serialises one store\'s writes and runs many stores at once', async () => {
    const stores = await Promise.all([newStore(), newStore(), newStore()]);
    for (const { store } of stores) await execute(store, [{ sql: 'CREATE TABLE t (n INTEGER)' }]);
    await Promise.all(stores.flatMap(({ store }) => Array.from({ length: 20 }, (_, i) => execute(store, [{ sql: 'INSERT INTO t VALUES (?)', params: [i] }]))));
    for (const { store } of stores) expect(await count(store)).toBe(20);
  });

  it('a worker stuck in a statement ends when the server dies', async () => {
    // A server of its own (the built engine), SIGKILLed while its worker runs an endless query.
    const engineModule = join(PACKAGE_ROOT, 'dist', 'src', 'services', 'durable', 'stores', 'engines', 'sqlite', 'sqlite-engine.js');
    const loggerModule = join(PACKAGE_ROOT, 'dist', 'src', 'telemetry', 'logger.js');
    const file = join(dir, 'orphan.sqlite');
    const server = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { SqliteStoreEngine } = await import(${JSON.stringify(engineModule)});
         const { silentLogger } = await import(${JSON.stringify(loggerModule)});
         const engine = new SqliteStoreEngine({ workers: 1, exec: async () => ({}), logger: silentLogger() });
         const target = { id: 'o', name: 'o', kind: 'sqlite', config: engine.checkConfig({}), file: ${JSON.stringify(file)} };
         await engine.prepare(target, true);
         const store = await engine.open(target);
         await store.query({ sql: 'SELECT 1', params: [], maxRows: 1, timeoutMs: 5000 });
         console.log('ready');
         await store.query({ sql: ${JSON.stringify(ENDLESS)}, params: [], maxRows: 1, timeoutMs: 60000 });`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(server.pid)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
    expect(children).toHaveLength(1);
    server.kill('SIGKILL');
    const alive = (pid: number) => existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
    const deadline = Date.now() + 10_000;
    while (alive(children[0]!) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(alive(children[0]!)).toBe(false);
  });

  it('shutdown ends every worker and refuses later requests', async () => {
    const own = new SqliteStoreEngine({ workers: 2, exec: noExec, logger: silentLogger() });
    const { store } = await newStore({}, own);
    const before = workerPids();
    await query(store, 'SELECT 1');
    const pending = failure(query(store, ENDLESS, [], { timeoutMs: 30_000 }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const mine = workerPids().filter((pid) => !before.includes(pid));
    await own.shutdown();
    expect(await pending).toMatchObject({ code: 'STORE_UNAVAILABLE', message: /the server is shutting down$/ });
    expect(await failure(query(store, 'SELECT 1'))).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(workerPids().filter((pid) => mine.includes(pid))).toEqual([]);
  });
});

describe('a worker that cannot start', () => {
  const request = { op: 'close', file: '/nonexistent' } as const;

  it('reports a missing worker module', async () => {
    const pool = new SqliteHostPool(1, silentLogger(), join(dir, 'missing-worker.js'));
    await expect(pool.run(request, { timeoutMs: 5000, label: "sqlite store 'x'" })).rejects.toMatchObject({
      code: 'INTERNAL',
      message: /missing-worker\.js is missing: run npm run build$/,
    });
    await pool.shutdown();
  });

  it('reports a worker that exits before it is ready, with what it printed', async () => {
    const module = join(dir, 'broken-worker.mjs');
    writeFileSync(module, "console.error('cannot load better-sqlite3'); process.exit(3);\n");
    const pool = new SqliteHostPool(1, silentLogger(), module);
    await expect(pool.run(request, { timeoutMs: 5000, label: "sqlite store 'x'" })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: "sqlite store 'x': the sqlite worker could not start (exit 3): cannot load better-sqlite3",
    });
    await pool.shutdown();
  });

  it('refuses a pool without workers', () => {
    expect(() => new SqliteHostPool(0, silentLogger())).toThrow('sqlite store workers: 0 must be a whole number of at least 1');
  });
});
