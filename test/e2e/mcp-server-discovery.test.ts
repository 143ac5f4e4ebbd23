import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startMcp, texts } from '../helpers/mcp-process.js';
import { runCli, startServer, type ServerProcess } from '../helpers/server-process.js';

/** A loopback port nothing listens on (taken, then freed). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-mcp-find-'));
  dirs.push(dir);
  return dir;
};
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// A user who may not use the Docker socket: the engine is out of reach from this process.
const NO_DOCKER = { DOCKER_HOST: 'unix:///nonexistent/docker.sock' };

describe('sandboxd mcp without access to the engine', () => {
  it('exits non-zero, saying how to point at a server, when none answers on this host', async () => {
    const port = await freePort();
    const result = await runCli(['mcp', '--data-dir', tempDir()], { ...NO_DOCKER, SERVICE_PORT: String(port) });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`no sandboxd server answers at http://127.0.0.1:${port}`);
    expect(result.stderr).toContain('--server URL');
    expect(result.stdout).toBe('');
  });

  it('works through the server that answers on this host', async () => {
    server = await startServer(tempDir(), ['--backend', 'fake']);
    const port = new URL(server.url).port;
    const mcp = await startMcp(['--data-dir', tempDir()], { ...NO_DOCKER, SERVICE_PORT: port });
    try {
      await mcp.call('sandbox_create', { name: 'found' });
      const listed = await mcp.call('sandbox_list');
      expect(texts(listed).join('')).toContain('found');
      expect(mcp.stderr()).toContain('working through the server on this host');
    } finally {
      await mcp.close();
    }
  });
});
