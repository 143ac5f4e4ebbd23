import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { StoreEngineDouble } from '../../../helpers/store-engine-double.js';

/**
 * The store routes through app.inject(): validation of the request envelope (every 400 names
 * its field), status codes and response shapes. The engines are test doubles (sqlite, kv and
 * postgres; none for mysql), so what is checked here is the service's envelope alone;
 * test/integration/api-stores.test.ts runs the same routes over the real engines and servers.
 */
const PASSWORD = 'route-pw-9f!x';

let h: FakeHarness;
const sqlite = new StoreEngineDouble('sqlite');

beforeAll(async () => {
  h = await fakeHarness({}, undefined, { enabled: true, backlog: 100, webhookUrls: [] }, { engines: [sqlite, new StoreEngineDouble('kv'), new StoreEngineDouble('postgres')] });
  await h.services.sandboxes.create({ name: 'box' });
});
afterAll(async () => h.close());

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** The status, code, message and data a request is answered with, and the raw body. */
async function answer(method: Method, url: string, payload?: unknown) {
  const res = await h.app.inject({ method, url, ...(payload === undefined ? {} : { payload: payload as object }) });
  const body = res.json();
  return { status: res.statusCode, code: body.code, error: body.error, data: body.data, raw: res.body };
}

describe('store routes', () => {
  it('creates, reads by id and name, lists, patches, queries, executes and deletes', async () => {
    const created = await answer('POST', '/stores', { name: 'notes', kind: 'sqlite', sandbox: 'box' });
    expect(created.status).toBe(201);
    expect(created.data).toEqual({
      id: expect.any(String),
      name: 'notes',
      kind: 'sqlite',
      sandbox: 'box',
      config: {},
      size_bytes: 6,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const id = created.data.id as string;
    for (const path of [`/stores/${id}`, '/stores/notes']) expect((await answer('GET', path)).data.id).toBe(id);
    expect((await answer('GET', '/stores?kind=sqlite&sandbox=box')).data.map((s: { name: string }) => s.name)).toEqual(['notes']);
    expect((await answer('GET', '/stores?kind=kv')).data).toEqual([]);
    expect((await answer('PATCH', '/stores/notes', { config: { read_only: true } })).data.config).toEqual({ read_only: true });
    expect((await answer('PATCH', '/stores/notes', { config: { read_only: false } })).data.config).toEqual({ read_only: false });

    const query = await answer('POST', '/stores/notes/query', { sql: 'SELECT ?', params: [1] });
    expect(query).toMatchObject({ status: 200, data: { columns: ['sql', 'params'], rows: [['SELECT ?', '[1]']], row_count: 1, truncated: false, column_types: ['text', 'text'] } });
    expect(Object.keys(query.data)).toEqual(['columns', 'rows', 'row_count', 'truncated', 'column_types', 'duration_ms']);
    const single = await answer('POST', `/stores/${id}/execute`, { sql: 'INSERT INTO t VALUES (1)' });
    expect(Object.keys(single.data)).toEqual(['rows_affected', 'last_insert_id', 'last_insert_rowid', 'duration_ms']);
    const batch = await answer('POST', '/stores/notes/execute', { statements: [{ sql: 'A' }, { sql: 'B', params: [2] }], transaction: false });
    expect(batch.data).toEqual({
      results: [
        { rows_affected: 1, last_insert_id: 1, last_insert_rowid: 1 },
        { rows_affected: 1, last_insert_id: 2, last_insert_rowid: 2 },
      ],
      rows_affected: 2,
      duration_ms: expect.any(Number),
    });
    expect((await answer('DELETE', '/stores/notes')).data).toBe("store 'notes' deleted");
    expect((await answer('GET', `/stores/${id}`)).status).toBe(404);
  });

  it('runs commands on a kv store and answers 422 for the wrong op, 403 on a read-only store', async () => {
    await answer('POST', '/stores', { name: 'cache', kind: 'kv' });
    expect((await answer('POST', '/stores/cache/command', { command: ['SET', 'k', [1, 2]] })).data).toEqual({ result: 'OK' });
    expect((await answer('POST', '/stores/cache/command', { command: ['GET', 'k'], timeout_ms: 500 })).data).toEqual({ result: [1, 2] });
    expect(await answer('POST', '/stores/cache/query', { sql: 'SELECT 1' })).toMatchObject({
      status: 422,
      code: 'UNSUPPORTED',
      error: "query: store 'cache' is a kv store: it answers POST /stores/cache/command",
    });
    await answer('POST', '/stores', { name: 'db', kind: 'sqlite', config: { read_only: true } });
    expect(await answer('POST', '/stores/db/command', { command: ['GET', 'k'] })).toMatchObject({ status: 422, code: 'UNSUPPORTED' });
    expect(await answer('POST', '/stores/db/execute', { sql: 'DELETE FROM t' })).toMatchObject({ status: 403, code: 'FORBIDDEN', error: "store 'db' is read-only" });
    await answer('DELETE', '/stores/cache');
    await answer('DELETE', '/stores/db');
  });

  it('refuses bad requests with 400 naming the field', async () => {
    await answer('POST', '/stores', { name: 'lim', kind: 'sqlite' });
    const queriesBefore = sqlite.callsOf('query').length;
    const cases: [Method, string, unknown, RegExp][] = [
      ['POST', '/stores', { name: 'Bad Name', kind: 'sqlite' }, /^name: must match/],
      ['POST', '/stores', { name: 'x', kind: 'mongo' }, /^kind: must be one of sqlite, kv, queue, postgres, mysql, redis/],
      ['POST', '/stores', { name: 'x', kind: 'mysql' }, /^kind: this server has no mysql stores \(kinds: sqlite, kv, postgres\)/],
      ['POST', '/stores', { name: 'x', kind: 'sqlite', config: [] }, /^config: must be a JSON object/],
      ['POST', '/stores', { name: 'x', kind: 'sqlite', validate: 'no' }, /^validate: must be true or false/],
      ['POST', '/stores', { name: 'x', kind: 'sqlite', config: { path: 'x'.repeat(65 * 1024) } }, /^config: must be at most 64 KiB of JSON/],
      ['PATCH', '/stores/lim', { config: { path: 'x'.repeat(65 * 1024) } }, /^config: must be at most 64 KiB of JSON/],
      ['POST', '/stores', { name: 'x', kind: 'sqlite', extra: 1 }, /unknown field 'extra'/],
      ['POST', '/stores', { kind: 'sqlite' }, /^name: is required/],
      ['PATCH', '/stores/lim', {}, /^config: is required/],
      ['GET', '/stores?kind=nope', undefined, /^kind: must be one of/],
      ['POST', '/stores/lim/query', {}, /^sql: is required/],
      ['POST', '/stores/lim/query', { sql: '' }, /^sql: must not be empty/],
      ['POST', '/stores/lim/query', { sql: 'x'.repeat(1024 * 1024 + 1) }, /^sql: must be at most 1 MiB/],
      ['POST', '/stores/lim/query', { sql: 'S', params: Array.from({ length: 1001 }, () => 1) }, /^params: at most 1000 parameters/],
      ['POST', '/stores/lim/query', { sql: 'S', params: 'a' }, /^params: must be an array \(positional\) or an object/],
      ['POST', '/stores/lim/query', { sql: 'S', max_rows: 100_001 }, /^max_rows: must be at most 100000/],
      ['POST', '/stores/lim/query', { sql: 'S', max_rows: 0 }, /^max_rows: /],
      ['POST', '/stores/lim/query', { sql: 'S', timeout_ms: 60_001 }, /^timeout_ms: must be at most 60000/],
      ['POST', '/stores/lim/query', { sql: 'S', timeout_ms: 1.5 }, /^timeout_ms: must be an integer/],
      ['POST', '/stores/lim/execute', { statements: [] }, /^statements: must hold a statement/],
      ['POST', '/stores/lim/execute', { statements: [{ sql: 'A', extra: 1 }] }, /unknown field 'extra' in statements\[0\]/],
      ['POST', '/stores/lim/execute', { statements: Array.from({ length: 1001 }, () => ({ sql: 'A' })) }, /^statements: at most 1000 statements/],
      ['POST', '/stores/lim/execute', { sql: 'A', statements: [{ sql: 'B' }] }, /^statements: give sql or statements, not both/],
      ['POST', '/stores/lim/command', { command: [] }, /^command: must hold the command name/],
      ['POST', '/stores/lim/command', { command: 'GET k' }, /^command: /],
    ];
    for (const [method, url, payload, message] of cases) {
      const res = await answer(method, url, payload);
      expect([res.status, res.error], `${method} ${url} ${JSON.stringify(payload)?.slice(0, 80)}`).toEqual([400, expect.stringMatching(message)]);
    }
    expect(sqlite.callsOf('query')).toHaveLength(queriesBefore);
    expect(await answer('POST', '/stores/ghost/query', { sql: 'S' })).toMatchObject({ status: 404, error: "store 'ghost' not found" });
    expect(await answer('POST', '/stores', { name: 'lim', kind: 'kv' })).toMatchObject({ status: 409, error: "store 'lim' exists already" });
    expect(await answer('POST', '/stores', { name: 'y', kind: 'kv', sandbox: 'ghost' })).toMatchObject({ status: 404, error: "sandbox 'ghost' not found" });
    await answer('DELETE', '/stores/lim');
  });

  it('never answers or publishes the password, and masks a url', async () => {
    const created = await answer('POST', '/stores', {
      name: 'pg',
      kind: 'postgres',
      config: { url: `postgres://app:${PASSWORD}@db.test:5432/x`, user: 'app' },
    });
    expect(created.status).toBe(201);
    expect(created.data).toMatchObject({ status: 'ok', config: { url: 'postgres://app:****@db.test:5432/x', password_set: true } });
    const raws = [
      created.raw,
      (await answer('GET', '/stores/pg')).raw,
      (await answer('GET', '/stores')).raw,
      (await answer('PATCH', '/stores/pg', { config: { host: 'leaky.test', password: PASSWORD } })).raw,
      (await answer('POST', '/stores/pg/query', { sql: 'SELEC' })).raw,
      (await answer('DELETE', '/stores/pg')).raw,
    ];
    expect(raws[4]).toContain('"code":"INTERNAL"');
    for (const raw of raws) expect(raw).not.toContain(PASSWORD);
    const events = h.services.observability.bus.since(0).events.map((published) => published.json);
    expect(events.some((json) => json.includes('"store.created"'))).toBe(true);
    expect(events.join('')).not.toContain(PASSWORD);
  });

  it('documents the routes in the OpenAPI document', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths).filter((path) => path.startsWith('/stores'))).toEqual([
      '/stores',
      '/stores/{id}',
      '/stores/{id}/query',
      '/stores/{id}/execute',
      '/stores/{id}/command',
    ]);
    expect(JSON.stringify(doc)).not.toContain(PASSWORD);
  });
});
