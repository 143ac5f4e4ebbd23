import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStoreEngine } from '../../src/services/durable/stores/engines/sqlite/sqlite-engine.js';
import type { StoreHandle, StoreParams, StoreTarget } from '../../src/services/durable/stores/store-engine.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/** A sqlite store whose file lives in a real sandbox, run through the sandbox's python3. */
let rt: DockerRuntime;
let engine: SqliteStoreEngine;
const sandbox = uniqueName('sqlite');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

beforeAll(async () => {
  rt = await dockerRuntime();
  engine = new SqliteStoreEngine({ exec: (name, input) => rt.services.exec.exec(name, input), logger: silentLogger() });
  const created = await api('POST', '/sandboxes', { name: sandbox });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
});
afterAll(async () => {
  await engine?.shutdown();
  await rt?.dispose();
});

const target = (path: string, config: Record<string, unknown> = {}): StoreTarget => ({
  id: uniqueName('id'),
  name: 'app',
  kind: 'sqlite',
  sandbox,
  config: engine.checkConfig({ path, ...config }),
  file: '/nonexistent/host/file.sqlite',
});
const query = (store: StoreHandle, sql: string, params: StoreParams = [], timeoutMs = 10_000) => store.query!({ sql, params, maxRows: 100, timeoutMs });
const execute = (store: StoreHandle, statements: { sql: string; params?: StoreParams }[], transaction = true) =>
  store.execute!({ statements: statements.map((s) => ({ sql: s.sql, params: s.params ?? [] })), transaction, maxRows: 100, timeoutMs: 10_000 });
const failure = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (err) {
    return err as { code: string; message: string; details?: Record<string, unknown>; hint?: unknown };
  }
  throw new Error('expected a failure');
};
const sandboxExec = async (command: string[]) => (await api('POST', `/sandboxes/${sandbox}/exec`, { command })).body.data;

describe('sqlite store inside a sandbox', () => {
  it('creates the file in the sandbox and runs statements with the host engine\'s shapes', async () => {
    const app = target('/workspace/app.db');
    await engine.prepare(app, true);
    expect((await sandboxExec(['test', '-f', '/workspace/app.db'])).exit_code).toBe(0);
    const store = await engine.open(app);
    expect(store.sizeBytes).toBeUndefined();
    const results = await execute(store, [
      { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, flag INTEGER, doc TEXT, b BLOB)' },
      { sql: "INSERT INTO t (id, name, flag, doc, b) VALUES (?, ?, ?, ?, x'00ff') RETURNING id, b", params: ['9223372036854775807', "it's", true, { a: 1 }] },
      { sql: 'INSERT INTO t (name, flag) VALUES (:name, @flag)', params: { name: 'b', $flag: false } },
    ]);
    expect(results).toEqual([
      { rows_affected: 0, last_insert_id: null },
      {
        rows_affected: 1,
        last_insert_id: '9223372036854775807',
        result: { columns: ['id', 'b'], column_types: ['integer', 'blob'], rows: [['9223372036854775807', 'AP8=']], truncated: false },
      },
      // SQLite picks max(rowid) + 1, which overflows past 2^63 - 1: it then picks a free one at random.
      { rows_affected: 1, last_insert_id: expect.anything() },
    ]);
    expect(await query(store, 'SELECT name, flag, doc, b FROM t ORDER BY name')).toEqual({
      columns: ['name', 'flag', 'doc', 'b'],
      column_types: ['text', 'integer', 'text', 'blob'],
      rows: [
        ['b', 0, null, null],
        ["it's", 1, '{"a":1}', 'AP8='],
      ],
      truncated: false,
    });
    const some = await store.query!({ sql: 'SELECT name FROM t', params: [], maxRows: 1, timeoutMs: 10_000 });
    expect(some).toMatchObject({ rows: [[expect.any(String)]], truncated: true });
  });

  it('refuses at create a path that is no database, naming config.path', async () => {
    await sandboxExec(['sh', '-c', 'echo not a database > /workspace/notes.txt']);
    for (const [path, reason] of [
      ['/workspace/notes.txt', 'file is not a database'],
      ['/workspace', 'unable to open database file'],
      ['/no/such/dir/app.db', 'unable to open database file'],
    ] as const) {
      expect(await failure(engine.prepare(target(path), true)), path).toMatchObject({
        code: 'BAD_REQUEST',
        message: `config.path: '${path}' in sandbox '${sandbox}' cannot be opened as a sqlite database: ${reason} (create with validate: false to skip this check)`,
      });
    }
    await engine.prepare(target('/workspace/notes.txt'), false);
  });

  it('keeps query read-only and refuses stacked statements; the table is unchanged', async () => {
    const app = target('/workspace/ro.db');
    await engine.prepare(app, true);
    const store = await engine.open(app);
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT)' }, { sql: "INSERT INTO t VALUES ('keep')" }]);
    for (const sql of ["INSERT INTO t VALUES ('x')", 'DELETE FROM t', 'DROP TABLE t']) {
      expect(await failure(query(store, sql)), sql).toMatchObject({ code: 'READ_ONLY', message: 'query: statement writes', hint: { action: 'store_execute', store: 'app' } });
    }
    expect(await failure(query(store, 'SELECT 1; DELETE FROM t'))).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: holds more than one statement/ });
    expect(await failure(execute(store, [{ sql: 'SELECT 1; DELETE FROM t' }]))).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: holds more than one statement/ });
    expect(await failure(execute(store, [{ sql: 'BEGIN' }]))).toMatchObject({ code: 'BAD_REQUEST', message: /^sql: BEGIN is not allowed/ });
    expect((await query(store, 'SELECT v FROM t')).rows).toEqual([['keep']]);
  });

  it('reports engine errors, rolls a failed batch back, fills up at max_bytes and times out', async () => {
    const app = target('/workspace/errors.db', { max_bytes: 128 * 1024 });
    await engine.prepare(app, true);
    const store = await engine.open(app);
    await execute(store, [{ sql: 'CREATE TABLE t (v TEXT UNIQUE, b BLOB)' }]);
    expect(await failure(execute(store, [{ sql: "INSERT INTO t (v) VALUES ('a')" }, { sql: "INSERT INTO t (v) VALUES ('a')" }]))).toMatchObject({
      code: 'SQL_ERROR',
      message: 'statements[1]: UNIQUE constraint failed: t.v',
      details: { engine_code: 'SQLITE_CONSTRAINT_UNIQUE', statement: 1 },
    });
    expect((await query(store, 'SELECT count(*) FROM t')).rows).toEqual([[0]]);
    expect(await failure(query(store, 'SELECT ?', [1, 2]))).toMatchObject({ code: 'BAD_REQUEST', message: /^params: Incorrect number of bindings/ });
    expect(await failure(execute(store, [{ sql: 'INSERT INTO t (b) VALUES (zeroblob(300000))' }]))).toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      details: { engine_code: 'SQLITE_FULL' },
    });
    const started = Date.now();
    const endless = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';
    expect(await failure(query(store, endless, [], 1500))).toMatchObject({ code: 'TIMEOUT', message: /^sqlite store 'app': the statement did not finish within 1500 ms/ });
    expect(Date.now() - started).toBeLessThan(1500 + 5000);
  });

  it('leaves the file in the sandbox at destroy and names the sandbox when it is stopped', async () => {
    const app = target('/workspace/kept.db');
    await engine.prepare(app, true);
    const store = await engine.open(app);
    await engine.destroy(app);
    expect((await sandboxExec(['test', '-f', '/workspace/kept.db'])).exit_code).toBe(0);
    expect((await api('POST', `/sandboxes/${sandbox}/stop`)).status).toBe(200);
    const err = await failure(query(store, 'SELECT 1'));
    expect(err).toMatchObject({ code: 'CONFLICT', message: `sqlite store 'app' in sandbox '${sandbox}': sandbox '${sandbox}' is stopped`, hint: { action: 'start', sandbox } });
    expect(await failure(engine.prepare(target('/workspace/new.db'), true))).toMatchObject({ code: 'CONFLICT' });
  });
});
