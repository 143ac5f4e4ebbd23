import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, uniqueName } from '../helpers/docker-runtime.js';
import { expectCancelKills, startMcp, texts, type McpProcess } from '../helpers/mcp-process.js';
import { runCli, startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'mcp-remote-test-key';
const auth = { authorization: `Bearer ${KEY}` };

/** `sandboxd mcp` beside a `sandboxd serve` that owns the same data directory: one set of sandboxes, two faces. */
describe('sandboxd mcp through a running server', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-remote-'));
  const fromMcp = uniqueName('mcp-made');
  const fromHttp = uniqueName('http-made');
  let server: ServerProcess;
  let mcp: McpProcess;

  beforeAll(async () => {
    server = await startServer(dataDir, ['--api-key', KEY]);
    // No --server: it finds the owner of the data directory through <data-dir>/server.json.
    mcp = await startMcp(['--data-dir', dataDir], { SERVICE_API_KEY: KEY });
  });
  afterAll(async () => {
    await mcp?.close();
    for (const name of [fromMcp, fromHttp]) await call(server.url, 'DELETE', `/sandboxes/${name}`, undefined, auth);
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a sandbox made through MCP is seen through HTTP, and the other way round', async () => {
    const created = await mcp.call('sandbox_create', { name: fromMcp, labels: { face: 'mcp' } });
    expect(created.isError, texts(created)[0]).toBeFalsy();
    const seen = await call(server.url, 'GET', `/sandboxes/${fromMcp}`, undefined, auth);
    expect(seen.status).toBe(200);
    expect(seen.body.data).toMatchObject({ name: fromMcp, status: 'running', labels: { face: 'mcp' } });
    await mcp.call('sandbox_file_write', { name: fromMcp, path: '/workspace/note.txt', content: 'written by mcp' });
    expect((await call(server.url, 'GET', `/sandboxes/${fromMcp}/files/workspace/note.txt`, undefined, auth)).body.data.content).toBe('written by mcp');

    expect((await call(server.url, 'POST', '/sandboxes', { name: fromHttp, labels: { face: 'http' } }, auth)).status).toBe(201);
    expect(JSON.parse(texts(await mcp.call('sandbox_get', { name: fromHttp }))[0]!)).toMatchObject({ name: fromHttp, status: 'running' });
    expect(texts(await mcp.call('sandbox_exec', { name: fromHttp, command: ['echo', 'via mcp'] }))[1]).toBe('via mcp\n');
    const listed = JSON.parse(texts(await mcp.call('sandbox_list'))[0]!) as { name: string }[];
    expect(listed.map((s) => s.name).sort()).toEqual([fromHttp, fromMcp].sort());

    // A run goes through the server's POST /run, and its sandbox is gone afterwards.
    const run = await mcp.call('sandbox_run', { command: ['sh', '-c', 'echo ran; exit 7'], profile: 'restrictive' });
    expect(texts(run)).toEqual([expect.stringMatching(/^exit_code: 7\n/), 'ran\n']);
    const names = (await call(server.url, 'GET', '/sandboxes', undefined, auth)).body.data.map((s: { name: string }) => s.name);
    expect(names.sort()).toEqual([fromHttp, fromMcp].sort());

    // The server's audit log shows the MCP calls: they went through its API.
    const audit = (await call(server.url, 'GET', `/sandboxes/${fromHttp}/logs`, undefined, auth)).body.data as { event: string }[];
    expect(audit.map((e) => e.event)).toContain('command_executed');
  });

  it('kills a command when the client cancels its call (the connection to the server drops)', async () => {
    await expectCancelKills(mcp, uniqueName('mcp-cancel'));
  });

  it('says which key to give when the server refuses it, and what to check when it cannot be reached', async () => {
    const keyless = await startMcp(['--server', server.url]);
    try {
      await expect.poll(() => keyless.stderr()).toContain('the server needs an API key and none was given');
      const refused = await keyless.call('sandbox_list');
      expect(refused.isError).toBe(true);
      expect(texts(refused)[0]).toContain('give sandboxd mcp the server\'s key with --api-key or SERVICE_API_KEY');
    } finally {
      await keyless.close();
    }
    const nowhere = await startMcp([], { SERVICE_URL: 'http://127.0.0.1:9', SERVICE_API_KEY: KEY });
    try {
      const unreachable = await nowhere.call('sandbox_list');
      expect(unreachable.isError).toBe(true);
      expect(texts(unreachable)[0]).toMatch(/^cannot reach the sandboxd server at http:\/\/127\.0\.0\.1:9 .*check that `sandboxd serve` is running there$/);
    } finally {
      await nowhere.close();
    }
  });
});

describe('sandboxd mcp beside a server on HTTPS with a self-signed certificate', () => {
  it('trusts the certificate the server keeps in the data directory', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-tls-'));
    const server = await startServer(dataDir, ['--tls']);
    const mcp = await startMcp(['--data-dir', dataDir]);
    try {
      const listed = await mcp.call('sandbox_list');
      expect(listed.isError, texts(listed)[0]).toBeFalsy();
      expect(texts(listed)).toEqual(['[]']);
    } finally {
      await mcp.close();
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('sandboxd mcp on a data directory held by another MCP server', () => {
  it('refuses with a message that says what to do', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-held-'));
    const first = await startMcp(['--data-dir', dataDir]);
    try {
      const second = await runCli(['mcp', '--data-dir', dataDir]);
      expect(second.code).toBe(2);
      expect(second.stdout).toBe('');
      expect(second.stderr).toContain(
        `data directory ${dataDir} is in use by another sandboxd process (pid ${first.pid}) that serves no HTTP API: ` +
          'stop it, point this one at a server with --server URL, or give it its own --data-dir',
      );
    } finally {
      await first.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
