import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClient } from '../../../../src/backends/agent/agent-client.js';
import { AgentUnreachable, UnixSocketTransport, type AgentTransport } from '../../../../src/backends/agent/agent-transport.js';
import { ServiceError, WorkerFailed } from '../../../../src/errors.js';

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
    const failure = await client.exec({ command: ['true'], onFrame: (_stream, data) => output.push(data.toString()) }).catch((err: unknown) => err);
    client.close();
    expect(output).toEqual(['partial\n']);
    expect(failure).toBeInstanceOf(ServiceError);
    expect(failure).toMatchObject({ code: 'INTERNAL' });
    expect((failure as Error).message).toMatch(/closed the exec stream before the command ended .*stopped or restarted/);
  });

  it("takes the program's exec request and sends it in the agent's words, reading the exit frame back in the program's", async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
    const socket = join(dir, 'agent.sock');
    let body = '';
    server = createServer((req, res) => {
      req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/vnd.sandboxd.frames' });
        res.end(Buffer.concat([frame(2, 'warn\n'), frame(3, JSON.stringify({ exit_code: 137, timed_out: false, oom_killed: true }))]));
      });
    });
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    const client = new AgentClient(new UnixSocketTransport(async () => socket));
    const frames: string[] = [];
    const outcome = await client.exec({
      command: ['sh', '-c', 'x'],
      env: { A: '1', B: 'two words' },
      workdir: '/tmp',
      user: 'root',
      stdin: Buffer.from('in'),
      timeout_ms: 500,
      keep_background: true,
      onFrame: (stream, data) => frames.push(`${stream}:${data.toString()}`),
    });
    client.close();
    expect(JSON.parse(body)).toEqual({
      argv: ['sh', '-c', 'x'],
      env: ['A=1', 'B=two words'],
      cwd: '/tmp',
      user: 'root',
      stdin: Buffer.from('in').toString('base64'),
      timeout_ms: 500,
      keep_background: true,
    });
    expect(frames).toEqual(['stderr:warn\n']);
    expect(outcome).toEqual({ exit_code: 137, timed_out: false, aborted: false, oom_killed: true });
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

describe('AgentClient workers', () => {
  /** A fake agent that answers every request with the next of `answers` (status and JSON body), and records what it was asked. */
  async function scriptedAgent(answers: { status: number; body: unknown }[]): Promise<{ socket: string; seen: { method?: string; url?: string; body: string }[] }> {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
    const socket = join(dir, 'agent.sock');
    const seen: { method?: string; url?: string; body: string }[] = [];
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, body: Buffer.concat(chunks).toString() });
        const answer = answers.shift() ?? { status: 500, body: { error: 'no answer scripted' } };
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    return { socket, seen };
  }

  it('sends the wire shapes of agent/README.md and reads the answers', async () => {
    const worker = { key: 'k:1', pid: 7, argv: ['cat'], started: true, started_at: '2026-01-01T00:00:00Z' };
    const { socket, seen } = await scriptedAgent([
      { status: 200, body: worker },
      { status: 200, body: { line: 'n1 ok', stderr: 'log\n', duration_us: 1500 } },
      { status: 200, body: [worker] },
      { status: 200, body: { key: 'k:1' } },
      { status: 404, body: { error: "worker 'k:1' is not running" } },
    ]);
    const client = new AgentClient(new UnixSocketTransport(async () => socket));
    expect(await client.ensureWorker('k:1', { command: ['cat'], env: { A: '1' }, user: 'root' })).toEqual(worker);
    expect(await client.callWorker('k:1', { nonce: 'n&1', line: 'n1 {"a":"é"}', timeout_ms: 500 })).toEqual({ line: 'n1 ok', stderr: 'log\n', duration_us: 1500 });
    expect(await client.listWorkers()).toEqual([worker]);
    await client.stopWorker('k:1');
    await client.stopWorker('k:1');
    client.close();
    expect(seen).toEqual([
      { method: 'PUT', url: '/v1/workers/k%3A1', body: JSON.stringify({ argv: ['cat'], env: ['A=1'], user: 'root' }) },
      { method: 'POST', url: '/v1/workers/k%3A1/call?nonce=n%261&timeout_ms=500', body: 'n1 {"a":"é"}' },
      { method: 'GET', url: '/v1/workers', body: '' },
      { method: 'DELETE', url: '/v1/workers/k%3A1', body: '' },
      { method: 'DELETE', url: '/v1/workers/k%3A1', body: '' },
    ]);
  });

  it('maps the agent refusals to service errors: 404, timeout, exited, garbage, start failures, limits', async () => {
    const { socket } = await scriptedAgent([
      { status: 404, body: { error: "worker 'k' is not running" } },
      { status: 504, body: { error: "worker 'k' did not answer within 500ms", reason: 'timeout', stderr: 'slow\n' } },
      { status: 502, body: { error: "worker 'k' exited during the call (exit code 3)", reason: 'exited', exit_code: 3, stderr: 'boom\n' } },
      { status: 502, body: { error: "worker 'k' printed a line that is not its answer", reason: 'garbage', line: 'junk', stderr: '' } },
      { status: 413, body: { error: 'the line is over 33554432 bytes (32 MiB)' } },
      { status: 400, body: { error: 'nonce: 1-128 printable ASCII characters without spaces' } },
      { status: 422, body: { error: 'node: command not found', exit_code: 127 } },
      { status: 429, body: { error: 'this sandbox runs 64 workers already: stop one first' } },
      { status: 500, body: { error: 'pipe2: too many open files' } },
      { status: 404, body: '404 page not found' },
    ]);
    const client = new AgentClient(new UnixSocketTransport(async () => socket));
    const failure = (work: Promise<unknown>) => work.then(() => undefined, (err: unknown) => err);
    const callOnce = () => failure(client.callWorker('k', { nonce: 'n', line: 'n x', timeout_ms: 500 }));
    expect(await callOnce()).toMatchObject({ code: 'NOT_FOUND', message: "worker 'k' is not running" });
    expect(await callOnce()).toMatchObject({ code: 'TIMEOUT', message: expect.stringContaining('the worker was stopped'), details: { stderr: 'slow\n' } });
    const exited = await callOnce();
    expect(exited).toBeInstanceOf(WorkerFailed);
    expect(exited).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'exited', exit_code: 3, stderr: 'boom\n' } });
    const garbage = await callOnce();
    expect(garbage).toBeInstanceOf(WorkerFailed);
    expect(garbage).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'garbage', line: 'junk', stderr: '' } });
    expect(await callOnce()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect(await callOnce()).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('nonce') });
    const unstartable = await failure(client.ensureWorker('k', { command: ['node'] }));
    expect(unstartable).toBeInstanceOf(WorkerFailed);
    expect(unstartable).toMatchObject({ details: { reason: 'exited', exit_code: 127, stderr: 'sandboxd-agent: node: command not found\n' } });
    expect(await failure(client.ensureWorker('k', { command: ['cat'] }))).toMatchObject({ code: 'LIMIT_REACHED' });
    expect(await failure(client.listWorkers())).toMatchObject({ code: 'INTERNAL', message: expect.stringContaining('too many open files') });
    // An agent without the routes (a sandbox made before workers existed).
    expect(await failure(client.ensureWorker('k', { command: ['cat'] }))).toMatchObject({ code: 'UNSUPPORTED', message: expect.stringContaining('recreate the sandbox') });
    client.close();
  });

  it('gives up on an agent that does not answer well past the call time limit, as a TIMEOUT', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
    const socket = join(dir, 'agent.sock');
    server = createServer((req) => req.resume());
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    const client = new AgentClient(new UnixSocketTransport(async () => socket), { workerCallSlackMs: 50 });
    await expect(client.callWorker('k', { nonce: 'n', line: 'n x', timeout_ms: 10 })).rejects.toMatchObject({ code: 'TIMEOUT' });
    client.close();
  });
});

describe('AgentClient connections', () => {
  it('keeps at most 4 unused connections after a burst, none once idle, and leaves a quiet request in flight alone', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-client-'));
    const socket = join(dir, 'agent.sock');
    let open = 0;
    server = createServer((req, res) => {
      req.resume();
      // A health check answers after 100 ms (so that 20 of them are under way at once); a
      // detached listing after 400 ms of silence, past the client's idle time.
      setTimeout(() => res.end(req.url === '/v1/health' ? '{"version":"t"}' : '[]'), req.url === '/v1/health' ? 100 : 400);
    });
    server.on('connection', (connection) => {
      open++;
      connection.on('close', () => open--);
    });
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    const client = new AgentClient(new UnixSocketTransport(async () => socket), { idleMs: 200 });
    await Promise.all(Array.from({ length: 20 }, () => client.health()));
    await expect.poll(() => open, { timeout: 100 }).toBeLessThanOrEqual(4);
    await expect.poll(() => open, { timeout: 2_000 }).toBe(0);
    expect(await client.listDetached()).toEqual([]);
    client.close();
  });
});
