import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ServiceError } from '../../../../../src/errors.js';
import { HANDLE_IDLE_MS, MAX_RESPONSE_BYTES } from '../../../../../src/services/durable/stores/index.js';
import type { SandboxEvent } from '../../../../../src/services/events/event-bus.js';
import { createLogger } from '../../../../../src/telemetry/logger.js';
import { codeOf, fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';
import { manualClock } from '../../../../helpers/manual-clock.js';
import { StoreEngineDouble } from '../../../../helpers/store-engine-double.js';

/**
 * The store service over TEST DOUBLES of the engines (test/helpers/store-engine-double.ts): what
 * the service owns (records, names, credentials, the request envelope, events, handles). The
 * engines themselves are tested against real servers in their own files.
 */
const PASSWORD = 'pw-Xq7!never-shown';

let h: FakeHarness;
let sqlite: StoreEngineDouble;
let kv: StoreEngineDouble;
let postgres: StoreEngineDouble;
let events: SandboxEvent[];
let logLines: string[];
const clock = manualClock('2026-01-01T00:00:00.000Z');

async function harness(settings: Parameters<typeof fakeHarness>[0] = {}): Promise<void> {
  sqlite = new StoreEngineDouble('sqlite');
  kv = new StoreEngineDouble('kv');
  postgres = new StoreEngineDouble('postgres');
  logLines = [];
  const logger = createLogger('debug', { write: (line: string) => void logLines.push(line) });
  h = await fakeHarness(settings, clock.clock, undefined, { engines: [sqlite, kv, postgres], logger });
  events = [];
  h.services.observability.bus.subscribe(({ event }) => void events.push(event));
  await h.services.sandboxes.create({ name: 'box' });
}

const stores = () => h.services.stores;

/** The message a call fails with, prefixed by its code. */
async function failure(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (err) {
    return `${(err as { code: string }).code} ${(err as Error).message}`;
  }
  return 'OK';
}

/** The next step a call fails with. */
async function hintOf(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (err) {
    return (err as ServiceError).hint;
  }
  return undefined;
}

beforeEach(() => harness());
afterEach(() => h.close());

describe('store service: create, read, list, delete', () => {
  it('creates a host store with its file, reads it by id and name, lists and deletes it with its file', async () => {
    const created = await stores().create({ name: 'notes', kind: 'sqlite' });
    expect(created).toMatchObject({ name: 'notes', kind: 'sqlite', sandbox: null, config: {}, size_bytes: 6 });
    expect(created.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    expect(created).not.toHaveProperty('status');
    const file = join(h.dataDir, 'stores', `${created.id}.sqlite`);
    expect(existsSync(file)).toBe(true);
    expect(sqlite.callsOf('prepare')[0]).toMatchObject({ validate: true, target: { id: created.id, name: 'notes', kind: 'sqlite', file } });
    expect(await stores().get(created.id)).toEqual(created);
    expect(await stores().get('notes')).toEqual(created);
    expect(events.at(-1)).toMatchObject({
      type: 'store.created',
      sandbox: '',
      sandbox_uuid: '',
      resource: { kind: 'store', id: created.id, name: 'notes' },
      metadata: { kind: 'sqlite' },
    });

    expect(await stores().remove('notes')).toBe("store 'notes' deleted");
    expect(existsSync(file)).toBe(false);
    expect(sqlite.callsOf('destroy')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'store.deleted', resource: { kind: 'store', id: created.id, name: 'notes' }, metadata: { reason: 'deleted' } });
    expect(await failure(stores().get('notes'))).toBe("NOT_FOUND store 'notes' not found");
    expect(await failure(stores().remove(created.id))).toBe(`NOT_FOUND store '${created.id}' not found`);
  });

  it('lists in name order, filtered by kind and by sandbox', async () => {
    await stores().create({ name: 'b-cache', kind: 'kv', sandbox: 'box' });
    await stores().create({ name: 'a-db', kind: 'sqlite' });
    await stores().create({ name: 'c-pg', kind: 'postgres', config: { host: 'db.test' }, validate: false });
    expect((await stores().list()).map((s) => s.name)).toEqual(['a-db', 'b-cache', 'c-pg']);
    expect((await stores().list({ kind: 'kv' })).map((s) => s.name)).toEqual(['b-cache']);
    expect((await stores().list({ sandbox: 'box' })).map((s) => [s.name, s.sandbox])).toEqual([['b-cache', 'box']]);
    expect((await stores().list({ sandbox: 'other' })).map((s) => s.name)).toEqual([]);
    expect((await stores().get('c-pg')).status).toBe('ok');
  });

  it('refuses an unknown kind, a bad config, a duplicate name and an unknown sandbox, naming the field', async () => {
    expect(await failure(stores().create({ name: 'r', kind: 'redis' }))).toBe('BAD_REQUEST kind: this server has no redis stores (kinds: sqlite, kv, postgres)');
    expect(await failure(stores().create({ name: 'x', kind: 'sqlite', config: { bogus: 1 } }))).toBe('BAD_REQUEST config.bogus: unknown field');
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { port: 'five' } }))).toBe('BAD_REQUEST config.port: must be an integer');
    expect(await failure(stores().create({ name: 'x', kind: 'sqlite', config: { password: 'p' } }))).toBe(
      'BAD_REQUEST config.password: a sqlite store lives on the host and has no password',
    );
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { password: 7 } }))).toMatch(/^BAD_REQUEST config\.password: must be a string/);
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { password: 'a', password_env: 'B' } }))).toBe(
      'BAD_REQUEST config.password_env: give config.password or config.password_env, not both',
    );
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { password_env: 'not a name' } }))).toMatch(/^BAD_REQUEST config\.password_env: must name/);
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { url: 'postgres://u:a@db/x', password: 'b' } }))).toMatch(
      /^BAD_REQUEST config\.url: holds a password and config\.password is given too/,
    );
    expect(await failure(stores().create({ name: 'x', kind: 'kv', config: { read_only: 'yes' } }))).toBe('BAD_REQUEST config.read_only: must be true or false');
    expect(await failure(stores().create({ name: 'x', kind: 'kv', sandbox: 'ghost' }))).toBe("NOT_FOUND sandbox 'ghost' not found");
    await stores().create({ name: 'taken', kind: 'kv' });
    expect(await failure(stores().create({ name: 'taken', kind: 'sqlite' }))).toBe("CONFLICT store 'taken' exists already");
    expect(sqlite.callsOf('prepare')).toHaveLength(0);
    expect((await stores().list()).map((s) => s.name)).toEqual(['taken']);
  });

  it('answers 422 for a kept store whose kind this server has no engine for, and still deletes it', async () => {
    const stamp = '2026-01-01T00:00:00.000Z';
    await h.store.db
      .insertInto('stores')
      .values({ id: 'r-1', name: 'legacy', kind: 'redis', sandbox: null, sandbox_uuid: null, config: '{}', secret: null, status: 'ok', created_at: stamp, updated_at: stamp })
      .execute();
    expect(await failure(stores().command('legacy', { command: ['PING'] }))).toBe("UNSUPPORTED store 'legacy' is a redis store, and this server has no redis engine");
    expect(await failure(stores().update('legacy', { config: {} }))).toBe("UNSUPPORTED store 'legacy' is a redis store, and this server has no redis engine");
    expect((await stores().get('legacy')).status).toBe('ok');
    expect(await stores().remove('legacy')).toBe("store 'legacy' deleted");
  });

  it('checks reachability at create unless told not to, and keeps the status of an external store from its last use', async () => {
    expect(await failure(stores().create({ name: 'pg', kind: 'postgres', config: { host: 'unreachable.test' } }))).toBe(
      'BAD_REQUEST config: cannot connect to postgres at unreachable.test:5432: ECONNREFUSED (create with validate: false to skip this check)',
    );
    const created = await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'down.test' }, validate: false });
    expect(created).toMatchObject({ status: 'ok', config: { host: 'down.test', port: 5432 } });
    expect(created).not.toHaveProperty('size_bytes');
    expect(await failure(stores().query('pg', { sql: 'SELECT 1' }))).toBe("STORE_UNAVAILABLE postgres store 'pg' at down.test:5432: ECONNREFUSED");
    expect((await stores().get('pg')).status).toBe('unreachable');
    await stores().update('pg', { config: { host: 'db.test' } });
    expect((await stores().query('pg', { sql: 'SELECT 1' })).rows).toEqual([['SELECT 1', '[]']]);
    expect((await stores().get('pg')).status).toBe('ok');
  });
});

describe('store service: operations', () => {
  it('answers query on a command kind and command on a SQL kind 422, naming the route that fits', async () => {
    await stores().create({ name: 'cache', kind: 'kv' });
    await stores().create({ name: 'db', kind: 'sqlite' });
    expect(await failure(stores().query('cache', { sql: 'SELECT 1' }))).toBe("UNSUPPORTED query: store 'cache' is a kv store");
    expect(await hintOf(stores().query('cache', { sql: 'SELECT 1' }))).toEqual({ action: 'store_ops', store: 'cache', ops: ['command'] });
    expect(await failure(stores().execute('cache', { sql: 'DELETE FROM t' }))).toBe("UNSUPPORTED execute: store 'cache' is a kv store");
    expect(await failure(stores().command('db', { command: ['GET', 'k'] }))).toBe(
      "UNSUPPORTED command: store 'db' is a sqlite store",
    );
    expect(await hintOf(stores().command('db', { command: ['GET', 'k'] }))).toEqual({ action: 'store_ops', store: 'db', ops: ['query', 'execute'] });
    expect(kv.callsOf('open')).toHaveLength(0);
  });

  it('passes the limits to the engine: max_rows 10000 and the server timeout by default, the request values when given', async () => {
    await h.close();
    await harness({ storeTimeout: 1234 });
    await stores().create({ name: 'db', kind: 'sqlite' });
    const answer = await stores().query('db', { sql: 'SELECT ?', params: ['a'] });
    expect(answer).toEqual({ columns: ['sql', 'params'], rows: [['SELECT ?', '["a"]']], row_count: 1, truncated: false, column_types: ['text', 'text'], duration_ms: expect.any(Number) });
    await stores().query('db', { sql: 'SELECT 2', max_rows: 5, timeout_ms: 60_000, params: { a: 1 } });
    expect(sqlite.callsOf('query').map((call) => call.request)).toEqual([
      { sql: 'SELECT ?', params: ['a'], maxRows: 10_000, timeoutMs: 1234 },
      { sql: 'SELECT 2', params: { a: 1 }, maxRows: 5, timeoutMs: 60_000 },
    ]);
    expect(sqlite.callsOf('open')).toHaveLength(1);
  });

  it('cuts rows past the response cap and says truncated; the engine\'s own truncation shows too', async () => {
    await stores().create({ name: 'db', kind: 'sqlite' });
    const wide = 'x'.repeat(1024 * 1024);
    sqlite.onQuery = () => ({ columns: ['v'], column_types: ['text'], rows: Array.from({ length: 10 }, () => [wide]), truncated: false });
    const cut = await stores().query('db', { sql: 'SELECT v FROM big' });
    expect(cut).toMatchObject({ truncated: true, row_count: 7 });
    expect(JSON.stringify(cut).length).toBeLessThan(MAX_RESPONSE_BYTES);
    sqlite.onQuery = () => ({ columns: ['n'], column_types: ['integer'], rows: [[1], [2]], truncated: true });
    expect(await stores().query('db', { sql: 'SELECT n FROM t' })).toMatchObject({ rows: [[1], [2]], row_count: 2, truncated: true });
  });

  it('executes one statement or a batch in the documented shapes, and refuses a body that is neither', async () => {
    await stores().create({ name: 'db', kind: 'sqlite' });
    expect(await stores().execute('db', { sql: 'INSERT INTO t VALUES (?)', params: [1] })).toEqual({
      rows_affected: 1,
      last_insert_id: 1,
      last_insert_rowid: 1,
      duration_ms: expect.any(Number),
    });
    sqlite.onExecute = (request) => [
      { rows_affected: 2, last_insert_id: null },
      { rows_affected: 1, last_insert_id: '9007199254740993', result: { columns: ['id'], column_types: ['integer'], rows: [[7]], truncated: false } },
    ].slice(0, request.statements.length);
    const batch = await stores().execute('db', { statements: [{ sql: 'UPDATE t SET a = 1' }, { sql: 'INSERT INTO t VALUES (?) RETURNING id', params: [2] }] });
    expect(batch).toEqual({
      results: [
        { rows_affected: 2, last_insert_id: null, last_insert_rowid: null },
        { rows_affected: 1, last_insert_id: '9007199254740993', last_insert_rowid: '9007199254740993', columns: ['id'], rows: [[7]], truncated: false },
      ],
      rows_affected: 3,
      duration_ms: expect.any(Number),
    });
    expect(sqlite.callsOf('execute').at(-1)!.request).toMatchObject({ transaction: true, statements: [{ params: [] }, { params: [2] }] });
    await stores().execute('db', { statements: [{ sql: 'A' }], transaction: false });
    expect(sqlite.callsOf('execute').at(-1)!.request.transaction).toBe(false);
    expect(await failure(stores().execute('db', {}))).toBe('BAD_REQUEST sql: is required (or statements, for a batch)');
    expect(await failure(stores().execute('db', { sql: 'A', statements: [{ sql: 'B' }] }))).toBe('BAD_REQUEST statements: give sql or statements, not both');
    expect(await failure(stores().execute('db', { statements: [{ sql: 'B' }], params: [1] }))).toMatch(/^BAD_REQUEST params: a batch takes/);
    expect(await failure(stores().execute('db', { sql: 'A', transaction: false }))).toBe('BAD_REQUEST transaction: applies to a batch (statements) only');
  });

  it('runs commands, refuses a nameless one and a result past the response cap', async () => {
    await stores().create({ name: 'cache', kind: 'kv' });
    expect(await stores().command('cache', { command: ['SET', 'k', { a: 1 }] })).toEqual({ result: 'OK' });
    expect(await stores().command('cache', { command: ['get', 'k'] })).toEqual({ result: { a: 1 } });
    expect(await failure(stores().command('cache', { command: [42] }))).toBe('BAD_REQUEST command[0]: must be the command name, a string such as "GET"');
    expect(await failure(stores().command('cache', { command: ['NOPE'] }))).toBe("BAD_REQUEST command: unknown command 'NOPE'");
    expect(await failure(stores().command('cache', { command: ['BIG', MAX_RESPONSE_BYTES] }))).toMatch(/^PAYLOAD_TOO_LARGE command: its result is \d+ bytes/);
    expect(kv.callsOf('command')[0]!.request.timeoutMs).toBe(10_000);
  });

  it('makes a read_only store refuse execute and write commands (403) but answer reads', async () => {
    await stores().create({ name: 'ro-db', kind: 'sqlite', config: { read_only: true } });
    await stores().create({ name: 'ro-kv', kind: 'kv', config: { read_only: true } });
    expect((await stores().get('ro-db')).config).toEqual({ read_only: true });
    expect(await failure(stores().execute('ro-db', { sql: 'DELETE FROM t' }))).toBe("FORBIDDEN store 'ro-db' is read-only");
    expect((await stores().query('ro-db', { sql: 'SELECT 1' })).row_count).toBe(1);
    expect(await failure(stores().command('ro-kv', { command: ['set', 'k', 'v'] }))).toBe("FORBIDDEN store 'ro-kv' is read-only: SET writes");
    expect(await failure(stores().command('ro-kv', { command: ['FLUSHALL'] }))).toBe("FORBIDDEN store 'ro-kv' is read-only: FLUSHALL writes");
    expect(await stores().command('ro-kv', { command: ['GET', 'k'] })).toEqual({ result: null });
    expect(sqlite.callsOf('execute')).toHaveLength(0);
    expect(kv.callsOf('command').map((call) => call.request.command[0])).toEqual(['GET']);
    await stores().update('ro-kv', { config: { read_only: null } });
    expect(await stores().command('ro-kv', { command: ['SET', 'k', 'v'] })).toEqual({ result: 'OK' });
  });

  it('counts every operation by kind, op and outcome', async () => {
    await stores().create({ name: 'cache', kind: 'kv' });
    await stores().command('cache', { command: ['PING'] });
    await stores().query('cache', { sql: 'SELECT 1' }).catch(() => undefined);
    const text = (await h.services.observability.metrics.scrape()).text;
    expect(text).toContain('sandboxd_store_ops_total{kind="kv",op="command",outcome="ok"} 1');
    expect(text).toContain('sandboxd_store_ops_total{kind="kv",op="query",outcome="unsupported"} 1');
    expect(text).toMatch(/sandboxd_store_op_duration_seconds_count\{kind="kv",op="command"\} 1/);
  });
});

describe('store service: credentials', () => {
  it('never shows, publishes or logs a password, seals it at rest and scrubs it from driver exceptions', async () => {
    const created = await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'leaky.test', user: 'app', password: PASSWORD }, validate: false });
    expect(created.config).toEqual({ host: 'leaky.test', user: 'app', port: 5432, password_set: true });
    const queried = await failure(stores().query('pg', { sql: 'SELEC 1' }));
    expect(queried).toBe('undefined driver failed on user:****@db');
    expect(await failure(stores().create({ name: 'pg2', kind: 'postgres', config: { host: 'leaky.test', password: PASSWORD } }))).toBe(
      'undefined login refused for password ****',
    );
    expect(postgres.callsOf('open')[0]!.target).toMatchObject({ password: PASSWORD, config: { host: 'leaky.test', user: 'app', port: 5432 } });
    expect(postgres.callsOf('checkConfig').every((call) => !('password' in call.config))).toBe(true);

    const shown = JSON.stringify([created, await stores().get('pg'), await stores().list(), await stores().update('pg', { config: { user: 'app2' } }), events]);
    expect(shown).not.toContain(PASSWORD);
    await stores().remove('pg');
    expect(JSON.stringify(events)).not.toContain(PASSWORD);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('')).not.toContain(PASSWORD);
    const row = await h.store.sql.all('SELECT secret FROM stores');
    expect(JSON.stringify(row)).not.toContain(PASSWORD);
  });

  it('moves a url password out of the url, masks it in views and keeps it when the masked url comes back', async () => {
    const created = await stores().create({ name: 'pg', kind: 'postgres', config: { url: `postgres://app:${encodeURIComponent(PASSWORD)}@db.test:5432/x` } });
    expect(created.config).toEqual({ url: 'postgres://app:****@db.test:5432/x', port: 5432, password_set: true });
    expect(postgres.callsOf('prepare')[0]!.target).toMatchObject({ password: PASSWORD, config: { url: 'postgres://app@db.test:5432/x' } });
    const stored = (await h.store.sql.first<{ config: string; secret: string }>('SELECT config, secret FROM stores'))!;
    expect(JSON.parse(stored.config).url).toBe('postgres://app@db.test:5432/x');
    expect(stored.secret).toMatch(/^v1\./);
    await stores().update('pg', { config: { url: 'postgres://app:****@db.test:5432/y' } });
    await stores().query('pg', { sql: 'SELECT 1' });
    expect(postgres.callsOf('open').at(-1)!.target).toMatchObject({ password: PASSWORD, config: { url: 'postgres://app@db.test:5432/y' } });
  });

  it('never sends a kept password to another server: moving a store takes its password again', async () => {
    // Issue 25 (noticed): a caller who may patch a store, not read its password, pointed it at a server of theirs.
    await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'db.test', password: PASSWORD } });
    const moved = 'BAD_REQUEST config: a store moved to another server (host or port) takes its password again: give config.password or config.password_env (or null for none); the kept one is never sent to a new server';
    expect(await failure(stores().update('pg', { config: { host: 'evil.test' } }))).toBe(moved);
    expect(await failure(stores().update('pg', { config: { port: 6543 } }))).toBe(moved);
    expect(await failure(stores().update('pg', { config: { host: null, url: 'postgres://app:****@evil.test/x' } }))).toBe(moved);
    expect(postgres.callsOf('open')).toHaveLength(0);
    expect((await stores().get('pg')).config).toMatchObject({ host: 'db.test', password_set: true });
    // Given again, or dropped, it moves; the same server keeps it.
    expect((await stores().update('pg', { config: { host: 'db2.test', password: 'another' } })).config).toMatchObject({ host: 'db2.test', password_set: true });
    expect((await stores().update('pg', { config: { database: 'app' } })).config).toMatchObject({ host: 'db2.test', password_set: true });
    expect((await stores().update('pg', { config: { host: 'db3.test', password: null } })).config).toEqual({ host: 'db3.test', port: 5432, database: 'app' });
    const variable = `SANDBOXD_TEST_PW_MOVE_${process.pid}`;
    expect((await stores().update('pg', { config: { password_env: variable } })).config).toMatchObject({ password_env: variable });
    expect(await failure(stores().update('pg', { config: { host: 'evil.test' } }))).toBe(moved);
  });

  it('rotates a password with PATCH (closing the open handle), switches to password_env and clears with null', async () => {
    await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'db.test', password: 'old-one' } });
    await stores().query('pg', { sql: 'SELECT 1' });
    expect(postgres.callsOf('open').at(-1)!.target.password).toBe('old-one');
    const rotated = await stores().update('pg', { config: { password: 'new-one', database: 'app' } });
    expect(rotated.config).toEqual({ host: 'db.test', port: 5432, database: 'app', password_set: true });
    expect(postgres.callsOf('close')).toHaveLength(1);
    await stores().query('pg', { sql: 'SELECT 1' });
    expect(postgres.callsOf('open').at(-1)!.target.password).toBe('new-one');

    const variable = `SANDBOXD_TEST_PW_${process.pid}`;
    process.env[variable] = 'from-env';
    try {
      const switched = await stores().update('pg', { config: { password_env: variable } });
      expect(switched.config).toEqual({ host: 'db.test', port: 5432, database: 'app', password_env: variable });
      await stores().query('pg', { sql: 'SELECT 1' });
      expect(postgres.callsOf('open').at(-1)!.target.password).toBe('from-env');
      const back = await stores().update('pg', { config: { password: 'third' } });
      expect(back.config).toEqual({ host: 'db.test', port: 5432, database: 'app', password_set: true });
    } finally {
      delete process.env[variable];
    }
    const cleared = await stores().update('pg', { config: { password: null, database: null } });
    expect(cleared.config).toEqual({ host: 'db.test', port: 5432 });
    await stores().query('pg', { sql: 'SELECT 1' });
    expect(postgres.callsOf('open').at(-1)!.target).not.toHaveProperty('password');
    expect(await failure(stores().update('pg', { config: { bogus: true } }))).toBe('BAD_REQUEST config.bogus: unknown field');
    expect(await failure(stores().update('ghost', { config: {} }))).toBe("NOT_FOUND store 'ghost' not found");
  });

  it('reads password_env at connect: a missing variable is 400 at a validated create and 503 at use', async () => {
    const variable = `SANDBOXD_TEST_MISSING_${process.pid}`;
    expect(await failure(stores().create({ name: 'pg', kind: 'postgres', config: { host: 'db.test', password_env: variable } }))).toBe(
      `BAD_REQUEST config.password_env: the server has no environment variable ${variable}`,
    );
    await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'db.test', password_env: variable }, validate: false });
    expect(await failure(stores().query('pg', { sql: 'SELECT 1' }))).toBe(
      `STORE_UNAVAILABLE postgres store 'pg': environment variable ${variable} (config.password_env) is not set on the server`,
    );
  });

  it('lets external stores connect only to the allowed hosts, naming the field', async () => {
    await h.close();
    await harness({ storeAllowedHosts: ['db.internal', '*.example.com'] });
    expect((await stores().create({ name: 'a', kind: 'postgres', config: { host: 'pg.example.com' } })).name).toBe('a');
    expect(await failure(stores().create({ name: 'b', kind: 'postgres', config: { host: 'evil.test' } }))).toBe(
      "BAD_REQUEST config.host: 'evil.test' is not among the hosts stores may connect to (--store-allowed-hosts: db.internal, *.example.com)",
    );
    expect(await failure(stores().create({ name: 'b', kind: 'postgres', config: { url: 'postgres://u@10.1.2.3/x' } }))).toMatch(/^BAD_REQUEST config\.url: '10\.1\.2\.3' is not among/);
    expect(await failure(stores().create({ name: 'b', kind: 'postgres' }))).toMatch(/^BAD_REQUEST config\.host: 'localhost' is not among/);
    expect(await failure(stores().update('a', { config: { host: 'evil.test' } }))).toMatch(/^BAD_REQUEST config\.host: 'evil\.test'/);
    expect((await stores().create({ name: 'c', kind: 'sqlite' })).name).toBe('c');
  });

  it('refuses internal addresses under the default *, unless an entry names them, and connects to the address it checked', async () => {
    const refused = /^BAD_REQUEST config\.(host|url): '[^']+'( \([^)]+\))? is an internal address .*--store-allowed-hosts names it/;
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '169.254.169.254', '0.0.0.0', 'db.loopback.test']) {
      expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { host }, validate: false }))).toMatch(refused);
    }
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { url: 'postgres://u@[::1]:6543/x' } }))).toMatch(/^BAD_REQUEST config\.url: '::1' is an internal/);
    expect(await failure(stores().create({ name: 'x', kind: 'postgres' }))).toMatch(/^BAD_REQUEST config\.host: 'localhost' \(127\.0\.0\.1\) is an internal/);
    expect(postgres.callsOf('prepare')).toHaveLength(0);
    // A public host is pinned: the engine is given the address the check resolved.
    await stores().create({ name: 'pub', kind: 'postgres', config: { host: 'pg.example.com' } });
    await stores().query('pub', { sql: 'SELECT 1' });
    expect(postgres.callsOf('open').at(-1)!.target).toMatchObject({ address: '1.1.1.1', config: { host: 'pg.example.com' } });

    await h.close();
    await harness({ storeAllowedHosts: ['*', 'localhost', '169.254.0.0/16', '::1'] });
    for (const host of ['localhost', '169.254.1.2', '::1']) {
      expect((await stores().create({ name: `ok-${host.replace(/[.:]/g, '-')}`.replace(/-+$/, ''), kind: 'postgres', config: { host } })).status).toBe('ok');
    }
    // localhost is named, not 127.0.0.1 itself, nor another name that resolves to it.
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { host: '127.0.0.1' } }))).toMatch(refused);
    expect(await failure(stores().create({ name: 'x', kind: 'postgres', config: { host: 'db.loopback.test' } }))).toMatch(refused);
  });

  it('checks the host again at connect: a name that resolves to an internal address later is refused there', async () => {
    await h.close();
    let answer = '1.1.1.1';
    await harness({ storeResolver: async () => [answer] });
    await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'rebind.test' } });
    answer = '127.0.0.1';
    expect(await failure(stores().query('pg', { sql: 'SELECT 1' }))).toMatch(/^BAD_REQUEST config\.host: 'rebind\.test' \(127\.0\.0\.1\) is an internal address/);
    expect(postgres.callsOf('open')).toHaveLength(0);
  });
});

describe('store service: sandbox binding and handles', () => {
  it('connects an external store of a sandbox without host to the sandbox, refusing a restrictive one', async () => {
    await stores().create({ name: 'pg', kind: 'postgres', sandbox: 'box' });
    const ip = h.backend.instances.values().next().value!.ip;
    expect(postgres.callsOf('prepare')[0]!.target).toMatchObject({ sandbox: 'box', defaultHost: ip });
    await h.services.sandboxes.create({ name: 'locked', profile: 'restrictive' });
    expect(await failure(stores().create({ name: 'pg2', kind: 'postgres', sandbox: 'locked' }))).toMatch(
      /^UNSUPPORTED sandbox: 'locked' is restrictive and has no network, so a postgres store cannot reach a server in it; give config.host$/,
    );
    expect((await stores().create({ name: 'pg3', kind: 'postgres', sandbox: 'locked', config: { host: 'db.test' } })).sandbox).toBe('locked');
    await h.services.sandboxes.stop('box');
    await stores().update('pg', { config: {} });
    expect(await failure(stores().query('pg', { sql: 'SELECT 1' }))).toBe("CONFLICT sandbox 'box' is stopped");
  });

  it('deletes the stores of a sandbox with it, and says so on the bus', async () => {
    const bound = await stores().create({ name: 'mine', kind: 'sqlite', sandbox: 'box' });
    await stores().create({ name: 'mine-too', kind: 'kv', sandbox: 'box' });
    await stores().create({ name: 'free', kind: 'kv' });
    const file = join(h.dataDir, 'stores', `${bound.id}.sqlite`);
    expect(existsSync(file)).toBe(true);
    await h.services.sandboxes.remove('box');
    expect((await stores().list()).map((s) => s.name)).toEqual(['free']);
    expect(existsSync(file)).toBe(false);
    const deleted = events.filter((event) => event.type === 'store.deleted');
    expect(deleted.map((event) => [event.resource?.name, event.sandbox, event.metadata.reason])).toEqual([
      ['mine', 'box', 'sandbox deleted'],
      ['mine-too', 'box', 'sandbox deleted'],
    ]);
  });

  it('deletes at start the stores of a sandbox whose removal a stopped server left to recovery', async () => {
    await stores().create({ name: 'orphan', kind: 'kv', sandbox: 'box' });
    await stores().create({ name: 'kept', kind: 'kv', sandbox: 'box' });
    await h.services.sandboxes.create({ name: 'gone' });
    await stores().create({ name: 'orphan2', kind: 'sqlite', sandbox: 'gone' });
    const gone = await h.services.sandboxes.require('gone');
    // What recovery does with a sandbox left `removing`: the record is deleted, no hook runs.
    await h.store.db.deleteFrom('sandboxes').where('uuid', '=', gone.uuid).execute();
    expect(await stores().recover()).toBe(1);
    expect((await stores().list()).map((s) => s.name)).toEqual(['kept', 'orphan']);
    expect(events.at(-1)).toMatchObject({ type: 'store.deleted', resource: { name: 'orphan2' }, metadata: { reason: 'sandbox deleted' } });
    expect(await stores().recover()).toBe(0);
  });

  it('shares one handle per store, closes it after 5 minutes idle and at shutdown', async () => {
    await stores().create({ name: 'db', kind: 'sqlite' });
    await stores().create({ name: 'cache', kind: 'kv' });
    await Promise.all([stores().query('db', { sql: 'SELECT 1' }), stores().query('db', { sql: 'SELECT 2' })]);
    expect(sqlite.callsOf('open')).toHaveLength(1);
    expect((await stores().get('db')).size_bytes).toBe(4096);
    const handles = stores().handles;
    expect(handles.nextDue()).toEqual(new Date(clock.clock().getTime() + HANDLE_IDLE_MS));
    clock.advance(HANDLE_IDLE_MS / 2000);
    await stores().command('cache', { command: ['PING'] });
    clock.advance(HANDLE_IDLE_MS / 2000);
    await handles.tick(clock.clock());
    expect(sqlite.callsOf('close')).toHaveLength(1);
    expect(kv.callsOf('close')).toHaveLength(0);
    expect(handles.size).toBe(1);
    await stores().query('db', { sql: 'SELECT 3' });
    expect(sqlite.callsOf('open')).toHaveLength(2);
    await stores().close();
    expect([sqlite.callsOf('close').length, kv.callsOf('close').length, handles.size]).toEqual([2, 1, 0]);
    expect(sqlite.callsOf('shutdown')).toHaveLength(1);
  });

  it('does not keep a failed open: the next call tries again', async () => {
    await stores().create({ name: 'pg', kind: 'postgres', config: { host: 'down.test' }, validate: false });
    expect(await codeOf(stores().query('pg', { sql: 'SELECT 1' }))).toBe('STORE_UNAVAILABLE');
    expect(await codeOf(stores().query('pg', { sql: 'SELECT 1' }))).toBe('STORE_UNAVAILABLE');
    expect(postgres.callsOf('open')).toHaveLength(2);
    expect(stores().handles.size).toBe(0);
  });
});
