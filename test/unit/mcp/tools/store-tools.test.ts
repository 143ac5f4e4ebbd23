import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient } from '../../../../src/client/inject-client.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { texts } from '../../../helpers/mcp-process.js';
import { mcpSession, type McpSession } from '../../../helpers/mcp-session.js';

/** The store tools through the in-process API, over the real sqlite and kv engines. */
describe('store MCP tools', () => {
  let harness: FakeHarness;
  let session: McpSession;
  const call = (name: string, args: Record<string, unknown> = {}) => session.call(name, args);
  const json = async (name: string, args: Record<string, unknown> = {}) => JSON.parse(texts(await call(name, args))[0]!);

  beforeAll(async () => {
    harness = await fakeHarness();
    session = await mcpSession(injectClient(harness.app, 'test'));
  });
  afterAll(async () => {
    await session.close();
    await harness.close();
  });

  it('lists the six store tools with their required arguments', async () => {
    const { tools } = await session.client.listTools();
    const required = Object.fromEntries(tools.filter((t) => t.name.startsWith('store_')).map((t) => [t.name, t.inputSchema.required ?? []]));
    expect(required).toEqual({
      store_create: ['name', 'kind'],
      store_list: [],
      store_query: ['store', 'sql'],
      store_execute: ['store'],
      store_command: ['store', 'command'],
      store_delete: ['store'],
    });
  });

  it('creates, lists, queries, executes, runs commands and deletes', async () => {
    expect(await json('store_create', { name: 'db', kind: 'sqlite' })).toMatchObject({ name: 'db', kind: 'sqlite', sandbox: null });
    expect(await json('store_create', { name: 'cache', kind: 'kv', config: { read_only: false } })).toMatchObject({ name: 'cache', config: { read_only: false } });
    expect((await json('store_list')).map((s: { name: string }) => s.name)).toEqual(['cache', 'db']);
    expect((await json('store_list', { kind: 'kv' })).map((s: { name: string }) => s.name)).toEqual(['cache']);
    expect(
      await json('store_execute', {
        store: 'db',
        statements: [{ sql: 'CREATE TABLE t (n INTEGER)' }, { sql: 'INSERT INTO t VALUES (?), (?)', params: [1, 2] }],
      }),
    ).toMatchObject({ rows_affected: 2 });
    expect(await json('store_execute', { store: 'db', sql: 'INSERT INTO t VALUES (?)', params: [3] })).toMatchObject({ rows_affected: 1, last_insert_id: 3 });
    expect(await json('store_query', { store: 'db', sql: 'SELECT n FROM t WHERE n > ? ORDER BY n', params: [1], max_rows: 1 })).toMatchObject({
      columns: ['n'],
      rows: [[2]],
      row_count: 1,
      truncated: true,
    });
    const write = await call('store_query', { store: 'db', sql: 'DELETE FROM t' });
    expect(write.isError).toBe(true);
    expect(texts(write)[0]).toBe("query: statement writes: use store_execute (store 'db')");
    expect(await json('store_command', { store: 'cache', command: ['SET', 'k', 'v'] })).toEqual({ result: 'OK' });
    expect(await json('store_command', { store: 'cache', command: ['GET', 'k'] })).toEqual({ result: 'v' });
    expect(texts(await call('store_delete', { store: 'cache' }))).toEqual(["store 'cache' deleted"]);
    expect(texts(await call('store_delete', { store: 'db' }))).toEqual(["store 'db' deleted"]);
  });

  it('answers bad input, the wrong op and unknown stores with isError results that name the field', async () => {
    await call('store_create', { name: 'kv1', kind: 'kv' });
    expect(await call('store_query', { store: 'kv1', sql: 'SELECT 1' })).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: "query: store 'kv1' is a kv store: use store_command (store 'kv1')" }],
    });
    expect(await call('store_command', { store: 'ghost', command: ['GET', 'k'] })).toMatchObject({ isError: true, content: [{ type: 'text', text: "store 'ghost' not found" }] });
    const badKind = await call('store_create', { name: 'x', kind: 'mongo' });
    expect(badKind.isError).toBe(true);
    expect(texts(badKind)[0]).toMatch(/kind/);
    const tooMany = await call('store_query', { store: 'kv1', sql: 'S', max_rows: 100_001 });
    expect(tooMany.isError).toBe(true);
    expect(texts(tooMany)[0]).toMatch(/max_rows/);
  });
});
