import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { startMcp } from '../helpers/mcp-process.js';
import { runCli } from '../helpers/server-process.js';

/**
 * `sandboxd mcp --tools` through the MCP SDK's client over stdio. The server named by --server
 * does not answer (port 9), so nothing is hosted and every selected tool is listed.
 */
const NOWHERE = ['--server', 'http://127.0.0.1:9'];

/** The names `sandboxd mcp` lists with these arguments and environment. */
async function listed(args: string[], env: Record<string, string> = {}): Promise<Tool[]> {
  const mcp = await startMcp([...NOWHERE, ...args], env);
  try {
    return (await mcp.client.listTools()).tools;
  } finally {
    await mcp.close();
  }
}

const names = (tools: Tool[]) => tools.map((tool) => tool.name);

/** Bytes of the definitions a client puts in front of its model: name, description and input schema of each tool, as JSON. */
const definitionBytes = (tools: Tool[]) =>
  Buffer.byteLength(JSON.stringify(tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }))));

describe('sandboxd mcp --tools', () => {
  let core: Tool[];
  let full: Tool[];
  beforeAll(async () => {
    core = await listed(['--tools', 'core']);
    full = await listed([]);
  });

  it('core lists at most 15 tools, the everyday loop of runs, sandboxes, commands and files', () => {
    expect(core.length).toBeLessThanOrEqual(15);
    expect(names(core)).toEqual(
      expect.arrayContaining(['sandbox_create', 'sandbox_list', 'sandbox_remove', 'sandbox_run', 'sandbox_exec', 'sandbox_file_read', 'sandbox_file_write', 'sandbox_file_list']),
    );
    expect(full.length).toBeGreaterThan(50);
  });

  it('globs and names select exactly the tools they match; a domain profile in the environment variable too', async () => {
    expect(names(await listed(['--tools', 'sandbox_exec_*,store_query']))).toEqual([
      'sandbox_exec_detach',
      'sandbox_exec_status',
      'sandbox_exec_logs',
      'sandbox_exec_kill',
      'sandbox_exec_list',
      'store_query',
    ]);
    expect(names(await listed([], { SANDBOXD_MCP_TOOLS: 'orchestrations' }))).toEqual([
      'orchestration_define',
      'orchestration_start',
      'orchestration_get',
      'orchestration_list',
      'orchestration_raise_event',
      'orchestration_terminate',
    ]);
  });

  it('refuses at start, exit 2, a value that names no tool or profile, or a glob that matches none', async () => {
    const bad = await runCli(['mcp', ...NOWHERE, '--tools', 'core,sandbox_teleport,zzz_*']);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/^sandboxd: --tools: 'sandbox_teleport' is neither a tool nor a profile; 'zzz_\*' matches no tool\. Profiles: core \(15 tools\), full \(\d+\), /);
    expect(bad.stderr).toContain('stores (6)');
    const fromEnv = await runCli(['mcp', ...NOWHERE], { SANDBOXD_MCP_TOOLS: 'shell' });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toMatch(/^sandboxd: SANDBOXD_MCP_TOOLS: 'shell' is neither a tool nor a profile/);
  });

  it('keeps the definitions small: every tool under 64 KB in all (65.4 KB before the descriptions were cut), core under 22 KB', () => {
    expect(definitionBytes(full)).toBeLessThan(64_000);
    expect(definitionBytes(core)).toBeLessThan(22_000);
    // The detached command's JSON is described once, in sandbox_exec_status.
    const describing = full.filter((tool) => tool.description?.includes('{id, sandbox, command, pid, status'));
    expect(names(describing)).toEqual(['sandbox_exec_status']);
  });
});
