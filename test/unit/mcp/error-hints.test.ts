import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError, STATUS_BY_CODE, type NextStep } from '../../../src/errors.js';
import { registerErrorHandling } from '../../../src/http/errors.js';
import { unwrap } from '../../../src/client/api-client.js';
import { injectClient } from '../../../src/client/inject-client.js';
import { domainTools } from '../../../src/services/domains.js';
import { createMcpServer, type SandboxdMcpServer } from '../../../src/mcp/server.js';
import { toolError } from '../../../src/mcp/tool-errors.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';
import { texts } from '../../helpers/mcp-process.js';

/** Every next step, with what the HTTP face and the MCP face say after the message. */
const STEPS: [NextStep, string, string][] = [
  [{ action: 'start', sandbox: 'a' }, 'start it with POST /sandboxes/a/start', "start it with sandbox_start (name 'a')"],
  [
    { action: 'recover', sandbox: 'a', then: 'start' },
    'recover it with POST /sandboxes/a/recover, then start it',
    "recover it with sandbox_recover (name 'a'), then start it with sandbox_start",
  ],
  [{ action: 'recover', sandbox: 'a' }, 'recover it first with POST /sandboxes/a/recover', "recover it first with sandbox_recover (name 'a')"],
  [
    { action: 'browser_open', sandbox: 'a', page: 'p' },
    'open it with POST /sandboxes/a/browser/pages/p/goto',
    "open it with browser_open (name 'a', page 'p')",
  ],
  [
    { action: 'browser_snapshot', sandbox: 'a', page: 'p', use_refs: true },
    'take a new snapshot (GET /sandboxes/a/browser/pages/p) and use its refs',
    "take a new snapshot (browser_snapshot (name 'a', page 'p')) and use its refs",
  ],
  [
    { action: 'browser_snapshot', sandbox: 'a', page: 'p' },
    'take a new snapshot (GET /sandboxes/a/browser/pages/p)',
    "take a new snapshot (browser_snapshot (name 'a', page 'p'))",
  ],
  [
    { action: 'list_directory', sandbox: 'a', path: '/workspace' },
    'list it with GET /sandboxes/a/fs?path=/workspace',
    "list it with sandbox_file_list (name 'a', path '/workspace')",
  ],
  [{ action: 'list_images' }, 'list the built images with GET /images', 'the built images are listed by GET /images of the server (no tool lists them)'],
  [
    { action: 'create_volume', volume: 'v' },
    'create it with POST /volumes',
    'create it with POST /volumes {"name": "v"} on the server (no tool creates volumes)',
  ],
  [{ action: 'store_execute', store: 's' }, 'use POST /stores/s/execute', "use store_execute (store 's')"],
  [{ action: 'store_execute' }, 'use POST /stores/{id}/execute', 'use store_execute'],
  [
    { action: 'store_ops', store: 's', ops: ['query', 'execute'] },
    'it answers POST /stores/s/query and POST /stores/s/execute',
    "use store_query or store_execute (store 's')",
  ],
  [{ action: 'register_class', class: 'C' }, 'register it first with POST /objects/classes', "register it first with object_class_define (name 'C')"],
  [
    { action: 'delete_proxy_hook', hook: 'h' },
    'delete it first with DELETE /proxy/hooks/h',
    'delete it first with DELETE /proxy/hooks/h on the server (no tool deletes hooks)',
  ],
  [{ action: 'set_llm_key', provider: 'p' }, 'store the key with PUT /llm/keys/p', 'an administrator stores the key with PUT /llm/keys/p on the server'],
  [{ action: 'set_llm_key' }, 'store the key with PUT /llm/keys/{provider}', 'an administrator stores the key with PUT /llm/keys/{provider} on the server'],
  [{ action: 'mint_terminal_token', sandbox: 'a' }, 'mint one with POST /sandboxes/a/pty/token', 'mint one with POST /sandboxes/a/pty/token on the server'],
];

/** A bare Fastify app with the error handler and one route that throws `error`. */
async function throwing(error: Error) {
  const app = Fastify();
  registerErrorHandling(app);
  app.get('/fail', async () => {
    throw error;
  });
  await app.ready();
  return app;
}

describe('next steps as data', () => {
  it('are said by the HTTP face with the route and carried in the envelope as data', async () => {
    for (const [hint, http] of STEPS) {
      const app = await throwing(new ServiceError('CONFLICT', 'it is so', { hint }));
      const res = await app.inject({ url: '/fail' });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual({ success: false, error: `it is so: ${http}`, code: 'CONFLICT', problem: 'it is so', hint });
      await app.close();
    }
  });

  it('are said by the MCP face with the tool, from the envelope the HTTP face sent', async () => {
    for (const [hint, , tool] of STEPS) {
      const app = await throwing(new ServiceError('CONFLICT', 'it is so', { hint }));
      const res = await app.inject({ url: '/fail' });
      const err = unwrapError(res.statusCode, res.body);
      expect(err).toMatchObject({ code: 'CONFLICT', message: 'it is so', hint });
      expect(toolError(err)).toEqual({ content: [{ type: 'text', text: `it is so: ${tool}` }], isError: true });
      await app.close();
    }
  });

  it('fall back to the server\'s own message when the step is missing or unknown to this client', () => {
    const old = JSON.stringify({ success: false, error: 'sandbox x is stopped: start it with POST /sandboxes/x/start', code: 'CONFLICT' });
    expect(() => unwrap(409, old)).toThrow(expect.objectContaining({ message: 'sandbox x is stopped: start it with POST /sandboxes/x/start', hint: undefined }));
    const newer = JSON.stringify({ success: false, error: 'x: do it with POST /x', code: 'CONFLICT', problem: 'x', hint: { action: 'teleport' } });
    expect(() => unwrap(409, newer)).toThrow(expect.objectContaining({ message: 'x: do it with POST /x', hint: undefined }));
  });
});

describe('error codes and details', () => {
  it('answers the new codes with their statuses and carries details beside error and code', async () => {
    const expected = { METHOD_FAILED: 422, TIMEOUT: 504, BUSY: 429, POLICY_DENIED: 403, READ_ONLY: 400, SQL_ERROR: 400, STORE_UNAVAILABLE: 503, SOURCE_UNAVAILABLE: 422 };
    for (const [code, status] of Object.entries(expected)) {
      expect(STATUS_BY_CODE[code as keyof typeof STATUS_BY_CODE], code).toBe(status);
    }
    const details = { engine_code: '42P01', position: 15 };
    const app = await throwing(new ServiceError('SQL_ERROR', 'relation "nope" does not exist', { details }));
    const res = await app.inject({ url: '/fail' });
    await app.close();
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, error: 'relation "nope" does not exist', code: 'SQL_ERROR', details });

    const err = unwrapError(res.statusCode, res.body);
    expect(err).toMatchObject({ code: 'SQL_ERROR', details });
    expect(texts(toolError(err))).toEqual(['relation "nope" does not exist', `details: ${JSON.stringify(details, null, 2)}`]);
  });
});

/** The whole path over the fake backend: service -> HTTP envelope -> MCP tool result. */
describe('next steps of a stopped or archived sandbox (fake backend)', () => {
  let h: FakeHarness | undefined;
  let mcp: SandboxdMcpServer | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close();
    await mcp?.close();
    await h?.close();
    client = mcp = h = undefined;
  });

  async function connect(): Promise<(name: string, args: Record<string, unknown>) => Promise<CallToolResult>> {
    h = await fakeHarness();
    mcp = await createMcpServer({ api: injectClient(h.app, 'test'), logger: silentLogger(), tools: domainTools() });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcp.server.connect(serverSide);
    client = new Client({ name: 'unit', version: '1' });
    await client.connect(clientSide);
    return async (name, args) => (await client!.callTool({ name, arguments: args })) as CallToolResult;
  }

  it('keeps the HTTP messages and says recover with the sandbox_recover tool in MCP', async () => {
    const call = await connect();
    await h!.services.sandboxes.create({ name: 'a' });
    await h!.services.sandboxes.stop('a');
    const stopped = await h!.app.inject({ method: 'POST', url: '/sandboxes/a/exec', payload: { command: ['true'] } });
    expect(stopped.statusCode).toBe(409);
    expect(stopped.json()).toMatchObject({
      error: "sandbox 'a' is stopped: start it with POST /sandboxes/a/start",
      problem: "sandbox 'a' is stopped",
      hint: { action: 'start', sandbox: 'a' },
    });

    await h!.services.lifecycle.archive('a', 'test');
    const exec = await h!.app.inject({ method: 'POST', url: '/sandboxes/a/exec', payload: { command: ['true'] } });
    expect(exec.json()).toMatchObject({
      code: 'CONFLICT',
      error: "sandbox 'a' is archived: recover it with POST /sandboxes/a/recover, then start it",
      hint: { action: 'recover', sandbox: 'a', then: 'start' },
    });
    const start = await h!.app.inject({ method: 'POST', url: '/sandboxes/a/start' });
    expect(start.json().error).toBe("sandbox 'a' is archived: recover it first with POST /sandboxes/a/recover");

    const execTool = await call('sandbox_exec', { name: 'a', command: ['true'] });
    expect(execTool.isError).toBe(true);
    expect(texts(execTool)).toEqual(["sandbox 'a' is archived: recover it with sandbox_recover (name 'a'), then start it with sandbox_start"]);
    expect(texts(await call('sandbox_start', { name: 'a' }))).toEqual(["sandbox 'a' is archived: recover it first with sandbox_recover (name 'a')"]);
    // The steps the MCP face named work as said.
    expect((await call('sandbox_recover', { name: 'a' })).isError).toBeFalsy();
    expect((await call('sandbox_start', { name: 'a' })).isError).toBeFalsy();
    expect((await call('sandbox_exec', { name: 'a', command: ['true'] })).isError).toBeFalsy();
  });
});

/** The ServiceError that `unwrap` throws for an error envelope. */
function unwrapError(status: number, body: string): ServiceError {
  try {
    unwrap(status, body);
  } catch (thrown) {
    return thrown as ServiceError;
  }
  throw new Error('unwrap did not throw');
}
