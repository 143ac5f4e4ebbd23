import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/backends/docker/agent-client.js';
import { ServiceError } from '../../src/errors.js';

/** One exec frame: type, big-endian length, payload (agent/README.md). */
const frame = (type: number, payload: string) => {
  const body = Buffer.from(payload);
  const header = Buffer.alloc(5);
  header[0] = type;
  header.writeUInt32BE(body.length, 1);
  return Buffer.concat([header, body]);
};

let dir: string | undefined;
let server: Server | undefined;
afterEach(() => {
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A fake agent on a Unix socket that starts an exec stream, sends one frame, then dies. */
async function dyingAgent(): Promise<string> {
  dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
  const socket = join(dir, 'agent.sock');
  server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/vnd.sandboxd.frames' });
    res.write(frame(1, 'partial\n'), () => setTimeout(() => res.socket?.destroy(), 20));
  });
  await new Promise<void>((resolve) => server!.listen(socket, resolve));
  return socket;
}

describe('AgentClient exec', () => {
  it('reports an exec stream cut before the exit frame as a ServiceError, not a bare "aborted"', async () => {
    const socket = await dyingAgent();
    const client = new AgentClient(async () => socket);
    const output: string[] = [];
    const failure = await client.exec({ cmd: ['true'], onFrame: (_stream, data) => output.push(data.toString()) }).catch((err: unknown) => err);
    client.close();
    expect(output).toEqual(['partial\n']);
    expect(failure).toBeInstanceOf(ServiceError);
    expect(failure).toMatchObject({ code: 'INTERNAL' });
    expect((failure as Error).message).toMatch(/closed the exec stream before the command ended .*stopped or restarted/);
  });
});
