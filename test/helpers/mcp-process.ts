import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { CLI } from './server-process.js';

export interface McpProcess {
  client: Client;
  /** Calls a tool; the result as the SDK's client parsed it. */
  call(name: string, args?: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult>;
  stderr(): string;
  pid: number | null;
  close(): Promise<void>;
}

/** Spawns `sandboxd mcp` with `args` and connects the MCP SDK's client to it over stdio. */
export async function startMcp(args: string[], env: Record<string, string> = {}): Promise<McpProcess> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', ...args],
    // The shared network name of spawned servers (vitest.config.ts), which the SDK's default environment leaves out.
    env: { ...getDefaultEnvironment(), SERVICE_LOG_LEVEL: 'warn', SANDBOXD_NETWORK_NAME: process.env.SANDBOXD_NETWORK_NAME ?? 'sandboxd', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => (stderr += chunk));
  const client = new Client({ name: 'sandboxd-tests', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (err) {
    throw new Error(`sandboxd mcp did not start: ${(err as Error).message}\n${stderr}`);
  }
  return {
    client,
    call: async (name, toolArgs = {}, signal) =>
      (await client.callTool({ name, arguments: toolArgs }, undefined, signal ? { signal } : {})) as CallToolResult,
    stderr: () => stderr,
    pid: transport.pid,
    close: () => client.close(),
  };
}

/** The text blocks of a result, in order. */
export const texts = (result: CallToolResult): string[] =>
  result.content.flatMap((block) => (block.type === 'text' ? [block.text] : []));

/** Cancels a long sandbox_exec in a new sandbox `name` and expects its command to be killed; removes the sandbox. */
export async function expectCancelKills(mcp: McpProcess, name: string): Promise<void> {
  await mcp.call('sandbox_create', { name });
  try {
    const abort = new AbortController();
    const pending = mcp.call('sandbox_exec', { name, command: ['sleep', '300'] }, abort.signal);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    abort.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    const count = async () => texts(await mcp.call('sandbox_exec', { name, command: ['pgrep', '-fc', 'sleep 300'] }))[1];
    await expect.poll(count, { timeout: 10_000 }).toBe('0\n');
  } finally {
    await mcp.call('sandbox_remove', { name });
  }
}
