import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../src/errors.js';
import type { ApiClient } from '../../../../src/client/api-client.js';
import { injectClient } from '../../../../src/client/inject-client.js';
import { domainTools } from '../../../../src/services/domains.js';
import { createMcpServer, type SandboxdMcpServer } from '../../../../src/mcp/server.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { texts } from '../../../helpers/mcp-process.js';

/** The MCP server over the fake backend, in-process through app.inject, with the SDK's client in memory. */
describe('MCP tools over the in-process API (fake backend)', () => {
  let harness: FakeHarness;
  let mcp: SandboxdMcpServer;
  let client: Client;
  const call = async (name: string, args: Record<string, unknown> = {}, signal?: AbortSignal) =>
    (await client.callTool({ name, arguments: args }, undefined, signal ? { signal } : {})) as CallToolResult;

  beforeEach(async () => {
    harness = await fakeHarness({ apiKeys: ['unit-test-key'] });
    mcp = await createMcpServer({ api: injectClient(harness.app, 'test', 'unit-test-key'), logger: silentLogger(), tools: domainTools() });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcp.server.connect(serverSide);
    client = new Client({ name: 'unit', version: '1' });
    await client.connect(clientSide);
  });
  afterEach(async () => {
    await client.close();
    await mcp.close();
    await harness.close();
  });

  it('creates, lists by label, writes, reads and deletes through the HTTP routes (with the key)', async () => {
    const created = await call('sandbox_create', { name: 'unit-a', labels: { team: 'x' } });
    expect(created.isError).toBeFalsy();
    expect(JSON.parse(texts(created)[0]!)).toMatchObject({ name: 'unit-a', status: 'running', labels: { team: 'x' } });
    await call('sandbox_create', { name: 'unit-b' });
    expect(JSON.parse(texts(await call('sandbox_list', { labels: { team: 'x' } }))[0]!).map((s: { name: string }) => s.name)).toEqual(['unit-a']);

    expect(texts(await call('sandbox_file_write', { name: 'unit-a', path: '/workspace/a dir/n?#.txt', content: 'hi' }))).toEqual([
      'wrote 2 bytes to /workspace/a dir/n?#.txt',
    ]);
    expect(texts(await call('sandbox_file_read', { name: 'unit-a', path: '/workspace/a dir/n?#.txt' }))).toEqual(['hi']);
    expect(texts(await call('sandbox_write_files', { name: 'unit-a', files: { 'b.bin': 'AAE=' }, encoding: 'base64' }))).toEqual(['wrote 1 file']);
    expect(texts(await call('sandbox_file_read', { name: 'unit-a', path: '/workspace/b.bin' }))).toEqual(['binary file, 2 bytes, base64:\nAAE=']);
    // The relative forms the API takes: b.bin is /workspace/b.bin for a read as for the write.
    expect(texts(await call('sandbox_file_read', { name: 'unit-a', path: 'b.bin' }))).toEqual(['binary file, 2 bytes, base64:\nAAE=']);
    expect(texts(await call('sandbox_file_delete', { name: 'unit-a', path: '/workspace/b.bin' }))).toEqual(['deleted /workspace/b.bin']);
    const listed = texts(await call('sandbox_file_list', { name: 'unit-a', path: '/workspace' }))[0]!;
    expect(listed).toMatch(/^dir +0 0755 \S+ a dir$/);
    expect((await call('sandbox_file_list', { name: 'unit-a', path: '/workspace/none' })).isError).toBe(true);
    expect(texts(await call('sandbox_file_read', { name: 'unit-a', path: '/workspace/a dir' }))[0]).toBe(
      "'/workspace/a dir' is a directory: list it with sandbox_file_list (name 'unit-a', path '/workspace/a dir')",
    );
  });

  it('sandbox_exec reports progress notifications when the client asks for them', async () => {
    harness.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'step 1\n' }, { stream: 'stdout', text: 'step 2\n' }], exit_code: 3 });
    await call('sandbox_create', { name: 'unit-p' });
    const progress: { progress: number; message?: string }[] = [];
    const result = (await client.callTool({ name: 'sandbox_exec', arguments: { name: 'unit-p', command: ['build'] } }, undefined, {
      onprogress: (p) => progress.push(p),
    })) as CallToolResult;
    expect(texts(result)[0]).toContain('exit_code: 3');
    expect(texts(result)[1]).toBe('step 1\nstep 2\n');
    expect(progress[0]).toMatchObject({ progress: 7, message: 'step 1' });
    // Without a progressToken the command is waited for as before.
    expect(texts(await call('sandbox_exec', { name: 'unit-p', command: ['build'] }))[1]).toBe('step 1\nstep 2\n');
  });

  it('sandbox_exec reports progress in-process while the command still runs, not once it ended', async () => {
    // Prints, then runs on until its 1.5 s timeout.
    harness.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'first\n' }], hang: true });
    await call('sandbox_create', { name: 'unit-q' });
    let firstProgressAt: number | undefined;
    const result = (await client.callTool({ name: 'sandbox_exec', arguments: { name: 'unit-q', command: ['slow'], timeout_ms: 1500 } }, undefined, {
      onprogress: (p) => {
        firstProgressAt ??= Date.now();
        expect(p).toMatchObject({ progress: 6, message: 'first' });
      },
    })) as CallToolResult;
    const endedAt = Date.now();
    expect(texts(result)[0]).toContain('exit_code: 124');
    expect(firstProgressAt).toBeDefined();
    expect(endedAt - firstProgressAt!).toBeGreaterThan(1000);
    // A refusal before the stream opens is read whole from the streamed reply, with its next step.
    await call('sandbox_stop', { name: 'unit-q' });
    const stopped = (await client.callTool({ name: 'sandbox_exec', arguments: { name: 'unit-q', command: ['true'] } }, undefined, {
      onprogress: () => undefined,
    })) as CallToolResult;
    expect(stopped).toMatchObject({ isError: true, content: [{ type: 'text', text: "sandbox 'unit-q' is stopped: start it with sandbox_start (name 'unit-q')" }] });
  });

  it('turns service errors into isError results that say what to do, naming tools rather than routes', async () => {
    const missing = await call('sandbox_get', { name: 'nope' });
    expect(missing).toMatchObject({ isError: true, content: [{ type: 'text', text: "sandbox 'nope' not found" }] });
    await call('sandbox_create', { name: 'unit-c' });
    await call('sandbox_stop', { name: 'unit-c' });
    const stopped = await call('sandbox_exec', { name: 'unit-c', command: ['true'] });
    expect(stopped.isError).toBe(true);
    expect(texts(stopped)[0]).toBe("sandbox 'unit-c' is stopped: start it with sandbox_start (name 'unit-c')");
    const sudo = await call('sandbox_run', { command: ['id'], sudo: true });
    expect(texts(sudo)[0]).toContain('sudo exec is disabled');
    expect(harness.backend.calls.filter((c) => c.op === 'create')).toHaveLength(1);
  });

  it('answers bad arguments with isError results that name the argument', async () => {
    const missing = await call('sandbox_exec', { name: 'x' });
    expect(missing.isError).toBe(true);
    expect(texts(missing)[0]).toMatch(/Invalid arguments for tool sandbox_exec.*command/s);
    const wrongType = await call('sandbox_create', { name: 'ok', vcpus: 'two' });
    expect(texts(wrongType)[0]).toMatch(/vcpus/);
    const empty = await call('sandbox_file_read', { name: 'ok', path: '' });
    expect(texts(empty)[0]).toContain('a path is required');
    const unknown = await call('sandbox_list', { label: 'a:b' });
    expect(unknown.isError).toBe(true);
  });

  it('runs once in a fresh sandbox that is removed afterwards', async () => {
    const result = await call('sandbox_run', { command: ['echo', 'hi'] });
    expect(texts(result)).toEqual([expect.stringMatching(/^exit_code: 0\nduration_ms: \d+$/), 'echo hi\n']);
    await harness.services.pool.settled();
    expect(await harness.services.sandboxes.list()).toEqual([]);
    expect(harness.backend.instances.size).toBe(0);
  });

  it('runs a batch, each command alone, with results in input order and bad items named', async () => {
    harness.backend.onExec = (request) => (request.command[0] === 'fail' ? { exit_code: 2 } : { chunks: [{ stream: 'stdout', text: `${request.command[1]}\n` }] });
    const result = await call('sandbox_run_batch', { commands: [{ command: ['echo', 'one'] }, { command: ['fail'] }, { command: ['echo', 'three'], image: 'none/such:1' }] });
    expect(JSON.parse(texts(result)[0]!)).toEqual([
      { output: 'one\n', error: null, exit_code: 0, timed_out: false, truncated: false },
      { output: '', error: null, exit_code: 2, timed_out: false, truncated: false },
      { output: '', error: expect.stringContaining("'none/such:1' is not available"), exit_code: null, timed_out: false, truncated: false },
    ]);
    const empty = await call('sandbox_run_batch', { commands: [] });
    expect(empty.isError).toBe(true);
    expect(texts(empty)[0]).toMatch(/commands/);
    await harness.services.pool.settled();
    expect(harness.backend.instances.size).toBe(0);
  });

  it('proxy_log answers the egress proxy decisions as JSON (none yet) and refuses a bad limit', async () => {
    const log = await call('proxy_log', { limit: 5 });
    expect(log.isError).toBeFalsy();
    expect(JSON.parse(texts(log)[0]!)).toEqual([]);
    expect((await call('proxy_log', { limit: 0 })).isError).toBe(true);
  });

  it('a cancelled call kills its command, and a cancelled run still removes its sandbox', async () => {
    harness.backend.onExec = () => ({ hang: true });
    await call('sandbox_create', { name: 'unit-d' });
    const abort = new AbortController();
    const calls = [
      call('sandbox_exec', { name: 'unit-d', command: ['sleep', '100'] }, abort.signal),
      call('sandbox_run', { command: ['sleep', '100'] }, abort.signal),
    ];
    await expect.poll(() => harness.backend.calls.filter((c) => c.op === 'exec').length).toBe(2);
    abort.abort();
    for (const pending of calls) await expect(pending).rejects.toThrow(/abort/i);
    // Closing waits for the calls in flight, which end only when their routes have finished:
    // both commands were killed and the run's sandbox is gone.
    await mcp.close();
    await harness.services.pool.settled();
    expect(harness.backend.instances.size).toBe(1);
    // The killed exec's audit row (exit 137) is written after the route saw its client leave:
    // at once on SQLite, a few statements later on PostgreSQL.
    const executed = async () => (await harness.services.logs('unit-d')).filter((e) => e.event === 'command_executed');
    await expect.poll(executed).toEqual([expect.objectContaining({ exit_code: 137 })]);
  });
});

describe('MCP tools listed by the capabilities of the server\'s backend', () => {
  let harness: FakeHarness;
  afterEach(async () => harness.close());

  /** The names of the tools a fresh MCP server lists over `api`. */
  const listed = async (api: ApiClient): Promise<string[]> => {
    const mcp = await createMcpServer({ api, logger: silentLogger(), tools: domainTools() });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await mcp.server.connect(serverSide);
    const client = new Client({ name: 'unit', version: '1' });
    await client.connect(clientSide);
    const { tools } = await client.listTools();
    await client.close();
    await mcp.close();
    return tools.map((tool) => tool.name);
  };

  it('skips the tools of a capability the backend lacks, as GET /status says, and lists them where it has it', async () => {
    harness = await fakeHarness();
    const api = injectClient(harness.app, 'test');
    const fake = await listed(api);
    expect(fake).toEqual(expect.arrayContaining(['sandbox_exec', 'sandbox_file_read', 'snapshot_take', 'sandbox_resize']));
    expect(fake.filter((name) => name.startsWith('browser_'))).toEqual([]);
    expect(fake).not.toContain('sandbox_exec_detach');

    harness.backend.declare('detached');
    harness.backend.omit('snapshots', 'resize');
    const other = await listed(api);
    expect(other).toEqual(expect.arrayContaining(['sandbox_exec_detach', 'sandbox_exec_logs', 'sandbox_exec']));
    expect(other.filter((name) => name.startsWith('snapshot_'))).toEqual([]);
    expect(other).not.toContain('sandbox_resize');
  });

  it('lists every tool when the server cannot say what its backend offers', async () => {
    harness = await fakeHarness();
    const down: ApiClient = {
      target: 'down',
      request: async () => {
        throw new ServiceError('BACKEND_UNAVAILABLE', 'not up yet');
      },
      stream: async () => {
        throw new ServiceError('BACKEND_UNAVAILABLE', 'not up yet');
      },
    };
    expect(await listed(down)).toHaveLength(domainTools().length);
  });
});
