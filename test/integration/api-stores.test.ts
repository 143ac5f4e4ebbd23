import pg from 'pg';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../helpers/fake-app.js';
import { runSuffix, testPassword } from '../helpers/store-engines.js';

/**
 * The store API end to end over the real engines: host sqlite (worker processes), kv and queue
 * files, and the PostgreSQL, MariaDB and Redis servers on 127.0.0.1 with a role, a user and an
 * ACL user of this run's own that have a password. Every response body, every published event
 * and every log line of a whole create / patch / query / execute / command / delete run is
 * searched for the password: it must appear nowhere (DECISIONS-WAVE2 3.8).
 */
const suffix = runSuffix();
const PASSWORD = testPassword();
const role = `sbx_api_${suffix}`;
const database = `sbx_api_${suffix}`;

let h: FakeHarness;
const logged: string[] = [];
const bodies: string[] = [];
const admin = new pg.Client({ host: '127.0.0.1', user: 'postgres', database: 'postgres' });

beforeAll(async () => {
  await admin.connect();
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}'`);
  await admin.query(`CREATE DATABASE ${database} OWNER ${role}`);
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(chunk.toString('utf8'));
        done();
      },
    }),
  );
  // The servers are on loopback, which stores reach only when --store-allowed-hosts names it.
  h = await fakeHarness({ storeAllowedHosts: ['127.0.0.1'] }, undefined, { enabled: true, backlog: 1000, webhookUrls: [] }, { logger });
  await h.services.sandboxes.create({ name: 'box' });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.query(`DROP ROLE IF EXISTS ${role}`);
  await admin.end();
});

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** The status, code, message and data of an answer; its raw body is kept for the leak sweep. */
async function api(method: Method, url: string, payload?: unknown) {
  const res = await h.app.inject({ method, url, ...(payload === undefined ? {} : { payload: payload as object }) });
  bodies.push(res.body);
  const body = res.json();
  return { status: res.statusCode, code: body.code as string | undefined, error: body.error as string | undefined, data: body.data };
}

describe('stores over the real engines', () => {
  it('runs SQL on a host sqlite store: bound params, read-only queries, batches, RETURNING, big integers', async () => {
    const created = await api('POST', '/stores', { name: 'notes', kind: 'sqlite' });
    expect(created).toMatchObject({ status: 201, data: { name: 'notes', kind: 'sqlite', sandbox: null, config: {} } });
    const batch = await api('POST', '/stores/notes/execute', {
      statements: [
        { sql: 'CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT, big INTEGER, raw BLOB)' },
        { sql: 'INSERT INTO note (body, big, raw) VALUES (?, ?, ?)', params: ["it's a 'quote'", '9007199254740993', null] },
      ],
    });
    expect(batch).toMatchObject({ status: 200, data: { rows_affected: 1 } });
    const returning = await api('POST', '/stores/notes/execute', { sql: "INSERT INTO note (body, raw) VALUES (:b, X'00ff') RETURNING id, raw", params: { b: 'two' } });
    expect(returning.data).toMatchObject({ rows_affected: 1, last_insert_id: 2, last_insert_rowid: 2, columns: ['id', 'raw'], rows: [[2, 'AP8=']] });
    const query = await api('POST', '/stores/notes/query', { sql: 'SELECT body, big FROM note WHERE id = ?', params: [1] });
    expect(query.data).toMatchObject({ columns: ['body', 'big'], rows: [["it's a 'quote'", '9007199254740993']], row_count: 1, truncated: false });
    expect(Object.keys(query.data)).toEqual(['columns', 'rows', 'row_count', 'truncated', 'column_types', 'duration_ms']);
    // Writes through /query, stacked statements and a file outside the store are refused; nothing changed.
    expect(await api('POST', '/stores/notes/query', { sql: 'DELETE FROM note' })).toMatchObject({ status: 400, code: 'READ_ONLY' });
    expect(await api('POST', '/stores/notes/query', { sql: 'SELECT 1; DELETE FROM note' })).toMatchObject({ status: 400 });
    expect(await api('POST', '/stores/notes/execute', { sql: "/* x */ ATTACH DATABASE '/tmp/x.db' AS x" })).toMatchObject({ status: 400 });
    expect((await api('POST', '/stores/notes/query', { sql: 'SELECT count(*) FROM note' })).data.rows).toEqual([[2]]);
    expect(await api('POST', '/stores/notes/execute', { sql: 'INSERT INTO nope VALUES (1)' })).toMatchObject({ status: 400, code: 'SQL_ERROR' });
    expect((await api('GET', '/stores/notes')).data.size_bytes).toBeGreaterThan(0);
    expect(await api('DELETE', '/stores/notes')).toMatchObject({ status: 200, data: "store 'notes' deleted" });
  });

  it('answers kv and queue commands, the wrong route with 422 and a read-only store with 403', async () => {
    await api('POST', '/stores', { name: 'cache', kind: 'kv' });
    expect((await api('POST', '/stores/cache/command', { command: ['SET', 'k', { n: [1, 2] }, 'EX', 60] })).data).toEqual({ result: 'OK' });
    expect((await api('POST', '/stores/cache/command', { command: ['get', 'k'] })).data).toEqual({ result: { n: [1, 2] } });
    expect(await api('POST', '/stores/cache/query', { sql: 'SELECT 1' })).toMatchObject({
      status: 422,
      error: "query: store 'cache' is a kv store: it answers POST /stores/cache/command",
    });
    await api('PATCH', '/stores/cache', { config: { read_only: true } });
    expect(await api('POST', '/stores/cache/command', { command: ['DEL', 'k'] })).toMatchObject({ status: 403, error: "store 'cache' is read-only: DEL writes" });
    expect((await api('POST', '/stores/cache/command', { command: ['TTL', 'k'] })).data.result).toBeGreaterThan(50);

    await api('POST', '/stores', { name: 'jobs', kind: 'queue' });
    const { id } = (await api('POST', '/stores/jobs/command', { command: ['ENQUEUE', { job: 1 }] })).data.result;
    const [message] = (await api('POST', '/stores/jobs/command', { command: ['DEQUEUE', 'VISIBILITY', 30] })).data.result;
    expect(message).toMatchObject({ id, body: { job: 1 }, attempts: 1 });
    expect((await api('POST', '/stores/jobs/command', { command: ['ACK', message.receipt] })).data.result).toBe(1);
    expect((await api('POST', '/stores/jobs/command', { command: ['STATS'] })).data.result).toEqual({ ready: 0, in_flight: 0, delayed: 0, dead: 0 });
    expect(await api('POST', '/stores/jobs/execute', { sql: 'SELECT 1' })).toMatchObject({ status: 422 });
    await api('DELETE', '/stores/cache');
    await api('DELETE', '/stores/jobs');
  });

  it('runs postgres queries with the password sealed, and never shows it', async () => {
    const created = await api('POST', '/stores', {
      name: 'pg',
      kind: 'postgres',
      config: { url: `postgres://${role}:${encodeURIComponent(PASSWORD)}@127.0.0.1:5432/${database}` },
    });
    expect(created).toMatchObject({ status: 201, data: { config: { url: `postgres://${role}:****@127.0.0.1:5432/${database}`, password_set: true }, status: 'ok' } });
    await api('POST', '/stores/pg/execute', { sql: 'CREATE TABLE item (id serial PRIMARY KEY, name text, n int8)' });
    expect((await api('POST', '/stores/pg/execute', { sql: 'INSERT INTO item (name, n) VALUES ($1, $2) RETURNING id', params: ["o'brien", '9007199254740993'] })).data).toMatchObject({
      rows_affected: 1,
      last_insert_id: null,
      rows: [[1]],
    });
    expect((await api('POST', '/stores/pg/query', { sql: 'SELECT name, n FROM item' })).data).toMatchObject({ rows: [["o'brien", '9007199254740993']], column_types: ['text', 'int8'] });
    expect(await api('POST', '/stores/pg/query', { sql: "SELECT nextval('item_id_seq')" })).toMatchObject({ status: 400, code: 'READ_ONLY' });
    // An engine message quotes what the caller sent as it is (store-error-oracle.test.ts: the password like any other word).
    const echoed = await api('POST', '/stores/pg/query', { sql: 'SELECT $1::int', params: ['one'] });
    expect(echoed).toMatchObject({ status: 400, code: 'SQL_ERROR', error: 'invalid input syntax for type integer: "one"' });
    expect(await api('POST', '/stores/pg/query', { sql: 'SELECT pg_sleep(10)', timeout_ms: 500 })).toMatchObject({ status: 504, code: 'TIMEOUT' });
    // A rotated password is used at once: the old handle is closed.
    await admin.query(`ALTER ROLE ${role} PASSWORD '${PASSWORD}-2'`);
    expect((await api('PATCH', '/stores/pg', { config: { password: `${PASSWORD}-2` } })).data.config).toMatchObject({ password_set: true });
    expect((await api('POST', '/stores/pg/query', { sql: 'SELECT count(*) FROM item' })).data.rows).toEqual([['1']]);
    expect(await api('DELETE', '/stores/pg')).toMatchObject({ status: 200 });
    // The server's data stays: a store is only forgotten.
    expect((await admin.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [database])).rowCount).toBe(1);
  });

  it("answers a mysql statement's warnings beside its rows, in query and execute", async () => {
    expect(await api('POST', '/stores', { name: 'maria', kind: 'mysql', config: { host: '127.0.0.1', user: 'root' } })).toMatchObject({ status: 201 });
    const warning = { level: 'warning', code: 1301, message: expect.stringContaining('max_allowed_packet') };
    expect((await api('POST', '/stores/maria/query', { sql: 'SELECT REPEAT(?, 30000000)', params: ['a'] })).data).toMatchObject({ rows: [[null]], warnings: [warning] });
    expect((await api('POST', '/stores/maria/execute', { sql: 'SELECT REPEAT(?, 30000000)', params: ['a'] })).data).toMatchObject({ rows: [[null]], warnings: [warning] });
    expect((await api('POST', '/stores/maria/query', { sql: 'SELECT 1' })).data).not.toHaveProperty('warnings');
    await api('DELETE', '/stores/maria');
  });

  it('names host and port when a server cannot be reached, at create and at use', async () => {
    const refused = await api('POST', '/stores', { name: 'gone', kind: 'mysql', config: { host: '127.0.0.1', port: 1, user: 'root' } });
    expect(refused).toMatchObject({ status: 400 });
    expect(refused.error).toMatch(/^config: cannot connect to mysql at 127\.0\.0\.1:1: .*\(create with validate: false to skip this check\)$/);
    await api('POST', '/stores', { name: 'gone', kind: 'redis', config: { host: '127.0.0.1', port: 1, password: PASSWORD }, validate: false });
    const unavailable = await api('POST', '/stores/gone/command', { command: ['PING'] });
    expect(unavailable).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' });
    expect(unavailable.error).toContain('127.0.0.1:1');
    expect((await api('GET', '/stores/gone')).data.status).toBe('unreachable');
    expect(await api('POST', '/stores/gone/command', { command: ['FLUSHALL'] })).toMatchObject({ status: 400 });
    await api('DELETE', '/stores/gone');
  });

  it('deletes a store bound to a sandbox with the sandbox', async () => {
    await api('POST', '/stores', { name: 'boxed', kind: 'kv', sandbox: 'box' });
    expect((await api('GET', '/stores?sandbox=box')).data.map((s: { name: string }) => s.name)).toEqual(['boxed']);
    await api('DELETE', '/sandboxes/box');
    expect(await api('GET', '/stores/boxed')).toMatchObject({ status: 404 });
  });

  it('never carried the password in a response, an event or a log line', async () => {
    expect(bodies.length).toBeGreaterThan(30);
    for (const body of bodies) expect(body).not.toContain(PASSWORD);
    const events = h.services.observability.bus.since(0).events.map((published) => published.json);
    expect(events.some((json) => json.includes('"store.created"'))).toBe(true);
    expect(events.join('\n')).not.toContain(PASSWORD);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.join('')).not.toContain(PASSWORD);
    expect(logged.join('')).not.toContain(encodeURIComponent(PASSWORD));
  });
});
