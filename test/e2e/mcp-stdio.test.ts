import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../helpers/docker-runtime.js';
import { expectCancelKills, startMcp, texts, type McpProcess } from '../helpers/mcp-process.js';
import { CLI } from '../helpers/server-process.js';

const TOOLS: Record<string, string[]> = {
  sandbox_create: ['name'],
  sandbox_list: [],
  sandbox_get: ['name'],
  sandbox_start: ['name'],
  sandbox_stop: ['name'],
  sandbox_remove: ['name'],
  sandbox_exec: ['name', 'command'],
  sandbox_run: ['command'],
  sandbox_run_batch: ['commands'],
  sandbox_exec_detach: ['name', 'command'],
  sandbox_exec_status: ['name', 'id'],
  sandbox_exec_logs: ['name', 'id'],
  sandbox_exec_kill: ['name', 'id'],
  sandbox_exec_list: ['name'],
  sandbox_file_read: ['name', 'path'],
  sandbox_file_write: ['name', 'path', 'content'],
  sandbox_write_files: ['name', 'files'],
  sandbox_file_delete: ['name', 'path'],
  sandbox_file_list: ['name', 'path'],
  sandbox_extend_ttl: ['name'],
  sandbox_resize: ['name'],
  sandbox_recover: ['name'],
  snapshot_take: ['sandbox', 'name'],
  snapshot_restore: ['name'],
  snapshot_list: [],
  snapshot_get: ['name'],
  snapshot_delete: ['name'],
  browser_open: ['name', 'url'],
  browser_snapshot: ['name'],
  browser_click: ['name'],
  browser_fill: ['name', 'value'],
  browser_screenshot: ['name'],
  browser_close: ['name'],
  browser_events: ['name'],
  sandbox_port_url: ['name', 'port'],
  object_class_define: ['name', 'runtime'],
  object_call: ['class', 'object_id', 'method'],
  object_get: ['class', 'object_id'],
  object_list: [],
  object_delete: ['class', 'object_id'],
  schedule_create: ['name', 'method'],
  schedule_list: [],
  schedule_delete: ['schedule'],
  schedule_trigger: ['schedule'],
  store_create: ['name', 'kind'],
  store_list: [],
  store_query: ['store', 'sql'],
  store_execute: ['store'],
  store_command: ['store', 'command'],
  store_delete: ['store'],
  llm_usage: [],
  permission_grant: ['principal'],
  permission_list: [],
  permission_revoke: ['id'],
  proxy_log: [],
  orchestration_define: ['definition'],
  orchestration_start: ['name'],
  orchestration_get: ['id'],
  orchestration_list: [],
  orchestration_raise_event: ['id', 'name'],
  orchestration_terminate: ['id'],
};

/** `sandboxd mcp` hosting the service in-process on its own data directory, on real Docker. */
describe('sandboxd mcp (in-process, stdio)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-'));
  const name = uniqueName('mcp');
  let mcp: McpProcess;

  beforeAll(async () => {
    mcp = await startMcp(['--data-dir', dataDir]);
  });
  /** Calls a tool that must succeed and answers JSON. */
  const json = async (tool: string, args: Record<string, unknown>) => {
    const result = await mcp.call(tool, args);
    expect(result.isError, `${tool}: ${texts(result)[0]}`).toBeFalsy();
    return JSON.parse(texts(result)[0]!);
  };

  afterAll(async () => {
    await mcp?.call('sandbox_remove', { name }).catch(() => undefined);
    await mcp?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists every tool with its required arguments, a description and an object schema', async () => {
    const { tools } = await mcp.client.listTools();
    expect(Object.fromEntries(tools.map((t) => [t.name, t.inputSchema.required ?? []]))).toEqual(TOOLS);
    for (const tool of tools) {
      expect(tool.description!.length, tool.name).toBeGreaterThan(60);
      expect(tool.inputSchema.type).toBe('object');
    }
    expect(mcp.client.getServerVersion()).toMatchObject({ name: 'sandboxd' });
  });

  it('runs every tool once on real Docker', async () => {
    const created = await mcp.call('sandbox_create', { name, labels: { suite: 'mcp-e2e' }, memory_mb: 256, env: { GREETING: 'hello' } });
    expect(created.isError, texts(created)[0]).toBeFalsy();
    expect(JSON.parse(texts(created)[0]!)).toMatchObject({ name, status: 'running', memory_mb: 256, labels: { suite: 'mcp-e2e' } });

    const listed = JSON.parse(texts(await mcp.call('sandbox_list', { labels: { suite: 'mcp-e2e' } }))[0]!);
    expect(listed).toEqual([expect.objectContaining({ name, status: 'running' })]);
    expect(JSON.parse(texts(await mcp.call('sandbox_get', { name }))[0]!)).toMatchObject({ name, image: 'sandboxd/base:bookworm' });

    const exec = await mcp.call('sandbox_exec', {
      name,
      command: ['bash', '-c', 'echo "$GREETING $EXTRA from $(pwd) as $(whoami)"; cat; exit 3'],
      env: ['EXTRA=world'],
      workdir: '/tmp',
      stdin: 'piped in',
    });
    expect(exec.isError).toBeFalsy();
    expect(texts(exec)).toEqual([expect.stringMatching(/^exit_code: 3\nduration_ms: \d+$/), 'hello world from /tmp as sandbox\npiped in']);

    expect(texts(await mcp.call('sandbox_file_write', { name, path: '/workspace/src/main.py', content: 'print("hi €")' }))).toEqual([
      'wrote 15 bytes to /workspace/src/main.py',
    ]);
    expect(texts(await mcp.call('sandbox_write_files', { name, files: { 'src/a.txt': 'A', '/workspace/b.txt': 'B' } }))).toEqual(['wrote 2 files']);
    expect(texts(await mcp.call('sandbox_file_read', { name, path: '/workspace/src/main.py' }))).toEqual(['print("hi €")']);
    const python = await mcp.call('sandbox_exec', { name, command: ['python3', 'src/main.py'] });
    expect(texts(python)[1]).toBe('hi €\n');
    expect(texts(await mcp.call('sandbox_file_delete', { name, path: '/workspace/src' }))).toEqual(['deleted /workspace/src']);
    const gone = await mcp.call('sandbox_file_read', { name, path: '/workspace/src/a.txt' });
    expect(gone.isError).toBe(true);

    expect(JSON.parse(texts(await mcp.call('sandbox_stop', { name }))[0]!)).toMatchObject({ status: 'stopped' });
    const stopped = await mcp.call('sandbox_exec', { name, command: ['true'] });
    expect(stopped).toMatchObject({ isError: true });
    expect(texts(stopped)[0]).toContain(`start it with sandbox_start (name '${name}')`);
    expect(JSON.parse(texts(await mcp.call('sandbox_start', { name }))[0]!)).toMatchObject({ status: 'running' });
    expect(texts(await mcp.call('sandbox_file_read', { name, path: '/workspace/b.txt' }))).toEqual(['B']);

    const run = await mcp.call('sandbox_run', { command: ['python3', '-c', 'import sys; print(sys.version_info[0])'], image: 'sandboxd/python:bookworm' });
    expect(texts(run)).toEqual([expect.stringMatching(/^exit_code: 0\n/), '3\n']);
    const quiet = await mcp.call('sandbox_run', { command: ['true'] });
    expect(texts(quiet)).toEqual([expect.stringMatching(/^exit_code: 0\nduration_ms: \d+\noutput: \(none\)$/)]);

    expect(texts(await mcp.call('sandbox_remove', { name }))).toEqual([`sandbox '${name}' removed`]);
    // Only the removed sandbox was ever there: the runs' sandboxes are gone too.
    expect(JSON.parse(texts(await mcp.call('sandbox_list'))[0]!)).toEqual([]);
  });

  it('runs the lifecycle and snapshot tools on real Docker', async () => {
    const source = uniqueName('mcp-snap');
    const copy = `${source}-copy`;
    const snap = uniqueName('snap');
    try {
      await json('sandbox_create', { name: source, ttl: '1h' });
      await mcp.call('sandbox_file_write', { name: source, path: '/workspace/kept.txt', content: 'kept by the snapshot' });
      const extended = await json('sandbox_extend_ttl', { name: source, by: '2h' });
      expect(Date.parse(extended.expires_at) - Date.now()).toBeGreaterThan(2.9 * 3600 * 1000);
      expect(await json('sandbox_resize', { name: source, memory_mb: 384 })).toMatchObject({ memory_mb: 384 });
      expect(await json('snapshot_take', { sandbox: source, name: snap })).toMatchObject({ name: snap, sandbox: source, memory_mb: 384 });
      expect((await json('snapshot_list', {})).map((s: { name: string }) => s.name)).toContain(snap);
      expect(await json('snapshot_get', { name: snap })).toMatchObject({ image_tag: expect.stringMatching(new RegExp(`^sandboxd-snapshot/[0-9a-f]{12}:${snap}$`)) });
      expect(await json('snapshot_restore', { name: snap, as_name: copy })).toMatchObject({ name: copy, status: 'running' });
      expect(texts(await mcp.call('sandbox_file_read', { name: copy, path: '/workspace/kept.txt' }))).toEqual(['kept by the snapshot']);

      const refusals: [string, Record<string, unknown>, RegExp][] = [
        ['snapshot_take', { sandbox: source, name: snap }, /already exists/],
        ['sandbox_recover', { name: source }, /not archived/],
        ['sandbox_extend_ttl', { name: source, by: '10 minutes' }, /duration/],
        ['sandbox_resize', { name: source }, /vcpus, memory_mb or both/],
        ['snapshot_get', { name: 'no-such-snapshot' }, /not found/],
      ];
      for (const [tool, args, message] of refusals) {
        const result = await mcp.call(tool, args);
        expect(result.isError, tool).toBe(true);
        expect(texts(result)[0], tool).toMatch(message);
      }
      expect(texts(await mcp.call('snapshot_delete', { name: snap }))).toEqual([`snapshot '${snap}' deleted`]);
    } finally {
      await mcp.call('snapshot_delete', { name: snap });
      await mcp.call('sandbox_remove', { name: copy });
      await mcp.call('sandbox_remove', { name: source });
    }
  });

  it('runs the detached command tools on real Docker', async () => {
    const sandbox = uniqueName('mcp-detached');
    try {
      await json('sandbox_create', { name: sandbox });
      const started = await json('sandbox_exec_detach', { name: sandbox, command: ['sh', '-c', 'echo ready; echo oops >&2; sleep 300'] });
      expect(started).toMatchObject({ sandbox, status: 'running' });
      await expect.poll(async () => texts(await mcp.call('sandbox_exec_logs', { name: sandbox, id: started.id }))[0]).toBe('ready\n');
      expect(texts(await mcp.call('sandbox_exec_logs', { name: sandbox, id: started.id, stream: 'stderr' }))).toEqual(['oops\n']);
      expect(await json('sandbox_exec_status', { name: sandbox, id: started.id })).toMatchObject({ id: started.id, status: 'running' });
      expect((await json('sandbox_exec_list', { name: sandbox })).map((d: { id: string }) => d.id)).toEqual([started.id]);
      expect(await json('sandbox_exec_kill', { name: sandbox, id: started.id })).toMatchObject({ status: 'killed' });
      const unknown = await mcp.call('sandbox_exec_status', { name: sandbox, id: 'no-such-id' });
      expect(unknown.isError).toBe(true);
      expect(texts(unknown)[0]).toMatch(/not found/);
    } finally {
      await mcp.call('sandbox_remove', { name: sandbox });
    }
  });

  it('takes a command as one string and runs it with sh -c, beside the argv form', async () => {
    const run = await mcp.call('sandbox_run', { command: 'echo a && echo b; echo "$0" >&2' });
    expect(run.isError, texts(run)[0]).toBeFalsy();
    expect(texts(run)[1]!.split('\n').sort()).toEqual(['', 'a', 'b', 'sh']);
    const batch = JSON.parse(texts(await mcp.call('sandbox_run_batch', { commands: [{ command: 'echo one | tr a-z A-Z' }, { command: ['echo', 'a && b'] }] }))[0]!);
    expect(batch.map((item: { output: string }) => item.output)).toEqual(['ONE\n', 'a && b\n']);

    const box = uniqueName('mcp-string');
    await json('sandbox_create', { name: box });
    try {
      const exec = await mcp.call('sandbox_exec', { name: box, command: 'cd /tmp && pwd && echo a && echo b > f.txt && cat f.txt' });
      expect(texts(exec)).toEqual([expect.stringMatching(/^exit_code: 0\n/), '/tmp\na\nb\n']);
      const detached = await json('sandbox_exec_detach', { name: box, command: 'echo started; sleep 300' });
      expect(detached.command).toEqual(['sh', '-c', 'echo started; sleep 300']);
      await expect.poll(async () => texts(await mcp.call('sandbox_exec_logs', { name: box, id: detached.id }))[0]).toBe('started\n');
      await json('sandbox_exec_kill', { name: box, id: detached.id });
    } finally {
      await mcp.call('sandbox_remove', { name: box });
    }
  });

  it('answers bad arguments and unknown tools with isError results that name the problem', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['sandbox_exec', { command: ['true'] }, /name/],
      ['sandbox_exec', { name: 'x', command: 42 }, /must be a command: one string \(run with sh -c\) or a non-empty array of strings \(argv\) at command/],
      ['sandbox_run', { command: '' }, /must be a command.* at command/],
      ['sandbox_create', { name: 'x', vcpus: 'two' }, /vcpus/],
      ['sandbox_create', { name: 'Bad Name' }, /must match/],
      ['sandbox_file_write', { name: 'x', path: '', content: 'x' }, /a path is required/],
      ['sandbox_run', { command: [] }, /non-empty array/],
      ['sandbox_list', { unexpected: true }, /unexpected/],
      ['sandbox_teleport', {}, /sandbox_teleport not found/],
    ];
    for (const [tool, args, message] of cases) {
      const result = await mcp.call(tool, args);
      expect(result.isError, `${tool} ${JSON.stringify(args)}`).toBe(true);
      expect(texts(result)[0], tool).toMatch(message);
    }
  });

  it('caps 100 KB of output at the first and last 8 KB, never splitting a multi-byte character', async () => {
    // '€' is 3 bytes and straddles both cuts: byte 8192 of the output, and byte 8192 from its end.
    const script = "import sys; sys.stdout.write('a'*8191 + '€' + 'x'*100000 + '€' + 'b'*8190)";
    const result = await mcp.call('sandbox_run', { command: ['python3', '-c', script] });
    const output = texts(result)[1]!;
    const marker = /\n\[\.\.\. (\d+) bytes omitted: the output was (\d+) bytes, of which the first and last 8192 are shown \.\.\.\]\n/;
    const match = marker.exec(output)!;
    expect(match).not.toBeNull();
    const [head, tail] = output.split(match[0]);
    expect(head).toBe('a'.repeat(8191));
    expect(tail).toBe('b'.repeat(8190));
    expect(match.slice(1).map(Number)).toEqual([100_006, 116_387]);
    expect(texts(result)[0]).toMatch(/^exit_code: 0/);
  });

  it('kills a command when the client cancels its call', async () => {
    await expectCancelKills(mcp, uniqueName('mcp-cancel'));
  });

  it('reports progress as the command prints, before it ends', async () => {
    const box = uniqueName('mcp-progress');
    await json('sandbox_create', { name: box });
    try {
      const progress: { at: number; message?: string | undefined }[] = [];
      const result = (await mcp.client.callTool(
        { name: 'sandbox_exec', arguments: { name: box, command: ['sh', '-c', 'echo first; sleep 2; echo second'] } },
        undefined,
        { onprogress: ({ message }) => progress.push({ at: Date.now(), message }) },
      )) as CallToolResult;
      const endedAt = Date.now();
      expect(texts(result)[1]).toBe('first\nsecond\n');
      expect(progress[0]?.message).toBe('first');
      // The command slept 2 s after its first line: that line's progress came well before the end.
      expect(endedAt - progress[0]!.at).toBeGreaterThan(1500);
    } finally {
      await mcp.call('sandbox_remove', { name: box });
    }
  });
});

describe('sandboxd mcp stdout', () => {
  it('carries only JSON-RPC 2.0 messages, speaks protocol 2024-11-05 and exits when stdin closes', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-raw-'));
    const child = spawn(process.execPath, [CLI, 'mcp', '--data-dir', dataDir, '--log-level', 'debug'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const messages = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'sandbox_run', arguments: { command: ['sh', '-c', 'echo out; echo err >&2'] } } },
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'sandbox_get', arguments: { name: 'missing' } } },
      { jsonrpc: '2.0', id: 5, method: 'no/such/method' },
    ];
    // A malformed line is logged on stderr and skipped; the session goes on.
    child.stdin.write('this is not JSON\n');
    for (const message of messages) child.stdin.write(`${JSON.stringify(message)}\n`);
    try {
      await expect.poll(() => stdout.split('\n').filter(Boolean).length, { timeout: 60_000 }).toBe(5);
      child.stdin.end();
      const code = await new Promise((resolve) => child.once('exit', resolve));
      expect(code).toBe(0);
    } finally {
      child.kill();
      rmSync(dataDir, { recursive: true, force: true });
    }
    const replies = stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, any>);
    for (const reply of replies) expect(reply.jsonrpc).toBe('2.0');
    const byId = new Map(replies.map((r) => [r.id, r]));
    expect(byId.get(1)!.result).toMatchObject({ protocolVersion: '2024-11-05', serverInfo: { name: 'sandboxd' }, capabilities: { tools: {} } });
    expect(byId.get(2)!.result.tools).toHaveLength(Object.keys(TOOLS).length);
    expect(byId.get(3)!.result.content[1].text.split('\n').sort()).toEqual(['', 'err', 'out']);
    expect(byId.get(4)!.result).toEqual({ content: [{ type: 'text', text: "sandbox 'missing' not found" }], isError: true });
    expect(byId.get(5)!.error).toMatchObject({ code: -32601 });
    // The logs went to stderr, debug lines of the tool calls included.
    expect(stderr).toContain('"msg":"tool call"');
    expect(stderr).toContain('sandboxd mcp ready on stdio');
    expect(stderr).toContain('"msg":"MCP protocol error"');
  });
});
