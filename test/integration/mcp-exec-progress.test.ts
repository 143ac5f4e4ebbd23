import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpClient } from '../../src/client/http-client.js';
import { domainTools } from '../../src/services/domains.js';
import { createMcpServer, type SandboxdMcpServer } from '../../src/mcp/server.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { texts } from '../helpers/mcp-process.js';

let rt: DockerRuntime;
let mcp: SandboxdMcpServer;
let client: Client;
const name = uniqueName('progress');

beforeAll(async () => {
  rt = await dockerRuntime();
  expect((await call(rt.url, 'POST', '/sandboxes', { name })).status).toBe(201);
  mcp = await createMcpServer({ api: httpClient(rt.url), logger: silentLogger(), tools: domainTools() });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await mcp.server.connect(serverSide);
  client = new Client({ name: 'it', version: '1' });
  await client.connect(clientSide);
});
afterAll(async () => {
  await client?.close();
  await mcp?.close();
  await rt?.dispose();
});

describe('MCP sandbox_exec progress against a real server', () => {
  it('sends progress notifications while the command prints, before its result', async () => {
    const seen: { at: number; progress: number; message?: string }[] = [];
    const started = Date.now();
    const result = (await client.callTool(
      { name: 'sandbox_exec', arguments: { name, command: ['sh', '-c', 'for i in 1 2 3; do echo "line $i"; sleep 0.5; done'] } },
      undefined,
      { onprogress: (p) => seen.push({ at: Date.now() - started, ...p }) },
    )) as CallToolResult;
    const ended = Date.now() - started;
    expect(texts(result)[0]).toContain('exit_code: 0');
    expect(texts(result)[1]).toBe('line 1\nline 2\nline 3\n');
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen[0]!.message).toBe('line 1');
    // The first came as the command printed it, well before the command ended.
    expect(seen[0]!.at).toBeLessThan(ended - 500);
    expect(seen.map((p) => p.progress)).toEqual([...seen.map((p) => p.progress)].sort((a, b) => a - b));
  });
});
