import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/http/app.js';
import type { App } from '../../../src/http/route-types.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';
import { upload } from '../../helpers/preview-upload.js';

const KEY = 'preview-proxy-key';
const auth = { authorization: `Bearer ${KEY}` };
/** The request time-out of the app under test: uploads below last several times longer. */
const TIMEOUT_MS = 500;

let h: FakeHarness;
let app: App;
let apiPort: number;
/** A server standing in for the sandbox's, on the loopback (the fake backend's ports are the host's). */
let upstream: Server;
let upstreamPort: number;
/** The upstream's connections, and how many bytes each got. */
const upstreamSockets: Socket[] = [];
let upstreamBytes = 0;

/**
 * The sandbox's server: reads the request's headers, then by path: `/early` answers at once and
 * never reads the body nor closes; `/never` never answers; `/count` reads the body and answers
 * how many bytes came (the body's length is in `x-length`).
 */
function handle(socket: Socket): void {
  upstreamSockets.push(socket);
  let head = '';
  let body = 0;
  let path = '';
  let length = 0;
  const onData = (chunk: Buffer) => {
    if (!path) {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      path = head.split(' ')[1] ?? '';
      length = Number(/x-length: (\d+)/i.exec(head)?.[1] ?? 0);
      body = head.length - end - 4;
      if (path.startsWith('/early')) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nno\n');
        // Reads nothing more: the client's body backs up against it.
        socket.off('data', onData);
        socket.pause();
      }
    } else body += chunk.length;
    upstreamBytes += chunk.length;
    if (path.startsWith('/count') && body >= length) socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${String(body).length}\r\n\r\n${body}`);
  };
  socket.on('data', onData);
  socket.on('error', () => undefined);
}

beforeEach(async () => {
  h = await fakeHarness({ apiKeys: [KEY] });
  h.backend.declare('ports');
  app = await buildApp({ services: h.services, apiKeys: [KEY], logger: silentLogger(), requestTimeoutMs: TIMEOUT_MS });
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiPort = (app.server.address() as AddressInfo).port;
  upstream = createServer(handle);
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  upstreamBytes = 0;
  expect((await app.inject({ method: 'POST', url: '/sandboxes', headers: auth, payload: { name: 'box' } })).statusCode).toBe(201);
});
afterEach(async () => {
  for (const socket of upstreamSockets.splice(0)) socket.destroy();
  await new Promise((resolve) => upstream?.close(resolve));
  await app?.close();
  await h?.close();
});

/** An upload of `total` bytes to the sandbox's port through the path form (see the helper). */
const send = (path: string, total: number, chunk: number, everyMs = 0) =>
  upload(`http://127.0.0.1:${apiPort}`, `/sandboxes/box/ports/${upstreamPort}${path}`, { ...auth, 'x-length': String(total) }, total, chunk, everyMs);

describe('preview connections end with their exchange', () => {
  it('closes the client connection once the server has answered without reading a large upload', async () => {
    const sending = send('/early', 256 * 1024 * 1024, 64 * 1024);
    const got = await sending.closed;
    expect(got).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nno\n$/);
    // The connection to the sandbox went too: what the server left unread ends with the connection's end.
    await Promise.all(upstreamSockets.map((socket) => new Promise((resolve) => socket.once('close', resolve).resume())));
  });

  it('closes the connections of uploads under way when their sandbox is deleted', async () => {
    const sending = send('/never', 256 * 1024 * 1024, 64 * 1024);
    await expect.poll(() => upstreamBytes).toBeGreaterThan(0);
    expect((await app.inject({ method: 'DELETE', url: '/sandboxes/box', headers: auth })).statusCode).toBe(200);
    // Closed by the delete: not left open until the request time-out cuts it (with a 408 after the sandbox's 502).
    expect(await sending.closed).not.toMatch(/HTTP\/1\.1 408 /);
  });

  it('closes the connections of uploads under way when the server stops', async () => {
    const sending = send('/never', 256 * 1024 * 1024, 64 * 1024);
    await expect.poll(() => upstreamBytes).toBeGreaterThan(0);
    await app.close();
    await sending.closed;
  });
});

describe('a preview upload is timed on idleness', () => {
  it('takes an upload that keeps coming for longer than the request time-out', async () => {
    // 24 bytes, one every fifth of the time-out: the whole lasts about 5 time-outs.
    const sending = send('/count', 24, 1, TIMEOUT_MS / 5);
    const answer = await sending.answered;
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    sending.socket.destroy();
    expect(upstreamBytes).toBeGreaterThan(24);
  });

  it('cuts an upload that stops coming for the request time-out, with a 408', async () => {
    const sending = send('/count', 100, 10, TIMEOUT_MS / 5);
    await expect.poll(() => upstreamBytes).toBeGreaterThan(0);
    sending.stop();
    expect(await sending.closed).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('still cuts a body of an API route that has not all arrived within the time-out, however it trickles', async () => {
    const socket = connect(apiPort, '127.0.0.1');
    let received = '';
    socket.on('data', (data: Buffer) => (received += data.toString()));
    socket.on('error', () => undefined);
    const body = JSON.stringify({ name: 'slowly-made' });
    socket.write(`POST /sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    let at = 0;
    const timer = setInterval(() => (at < body.length - 1 && !socket.destroyed ? socket.write(body.charAt(at++)) : clearInterval(timer)), TIMEOUT_MS / 5);
    await new Promise((resolve) => socket.once('close', resolve));
    clearInterval(timer);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });
});
