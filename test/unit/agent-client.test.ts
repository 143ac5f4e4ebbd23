import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/backends/agent/agent-client.js';
import { AgentUnreachable, UnixSocketTransport, type AgentTransport } from '../../src/backends/agent/agent-transport.js';
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
    const client = new AgentClient(new UnixSocketTransport(async () => socket));
    const output: string[] = [];
    const failure = await client.exec({ cmd: ['true'], onFrame: (_stream, data) => output.push(data.toString()) }).catch((err: unknown) => err);
    client.close();
    expect(output).toEqual(['partial\n']);
    expect(failure).toBeInstanceOf(ServiceError);
    expect(failure).toMatchObject({ code: 'INTERNAL' });
    expect((failure as Error).message).toMatch(/closed the exec stream before the command ended .*stopped or restarted/);
  });
});

describe('AgentClient transports', () => {
  it('speaks the same protocol over any transport, with its headers (TCP with a token here)', async () => {
    const seen: { url?: string; auth?: string }[] = [];
    server = createServer((req, res) => {
      seen.push({ url: req.url, auth: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ version: 't', pid: 1, default_user: 'user', uptime_seconds: 0 }));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    let connects = 0;
    const tcp: AgentTransport = {
      headers: { authorization: 'Bearer sandbox-token' },
      connect: () =>
        new Promise((resolve, reject) => {
          connects++;
          const socket = connect(port, '127.0.0.1', () => resolve(socket));
          socket.once('error', reject);
        }),
    };
    const client = new AgentClient(tcp);
    expect(await client.health()).toMatchObject({ default_user: 'user' });
    expect(await client.health()).toMatchObject({ version: 't' });
    client.close();
    expect(seen).toEqual([
      { url: '/v1/health', auth: 'Bearer sandbox-token' },
      { url: '/v1/health', auth: 'Bearer sandbox-token' },
    ]);
    expect(connects).toBe(1); // kept alive
  });

  it('is AgentUnreachable when the transport cannot connect, after one reset and retry', async () => {
    let resets = 0;
    const missing = join(tmpdir(), `sandboxd-no-agent-${process.pid}.sock`);
    const transport = new UnixSocketTransport(async () => missing);
    transport.reset = () => {
      resets++;
      UnixSocketTransport.prototype.reset.call(transport);
    };
    const client = new AgentClient(transport);
    await expect(client.health()).rejects.toBeInstanceOf(AgentUnreachable);
    client.close();
    expect(resets).toBe(2);
  });
});

describe('AgentClient reset', () => {
  /** A fake agent that answers a reset with `status` and `body`, or never when `status` is 0. */
  async function resettingAgent(status: number, body: object): Promise<string> {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
    const socket = join(dir, 'agent.sock');
    server = createServer((req, res) => {
      req.resume();
      if (status === 0) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    return socket;
  }

  it('names what the agent found left over, and gives up on a reset that does not answer', async () => {
    const refusing = await resettingAgent(409, { error: 'the sandbox could not be reset', leftovers: ['left behind: /tmp/x'] });
    const refused = new AgentClient(new UnixSocketTransport(async () => refusing));
    await expect(refused.reset()).rejects.toMatchObject({ code: 'CONFLICT', message: 'the sandbox could not be reset: left behind: /tmp/x' });
    refused.close();
    server?.close();
    const silent = await resettingAgent(0, {});
    const stuck = new AgentClient(new UnixSocketTransport(async () => silent));
    await expect(stuck.reset(50)).rejects.toThrow(/abort|timeout/i);
    stuck.close();
  });
});
