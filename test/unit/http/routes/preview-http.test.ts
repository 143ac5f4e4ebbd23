import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { getWithHeaders } from '../../../helpers/host-request.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

const KEY = 'preview-test-key';
const auth = { authorization: `Bearer ${KEY}` };

let h: FakeHarness;
let upstream: Server;
let upstreamPort: number;
let api: string;
/** What the sandbox's server saw of the last request. */
let seen: { method?: string; url?: string; headers?: IncomingMessage['headers']; body?: string };
let clock: ReturnType<typeof manualClock>;

/** An echo server standing in for the sandbox's (the fake's ports are the host's loopback). */
async function startUpstream(): Promise<void> {
  upstream = createServer((request, response) => {
    if (request.url === '/slow') {
      // A streamed answer: the first part now, the rest later.
      response.write('first ');
      setTimeout(() => response.end('last'), 600);
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      seen = { method: request.method, url: request.url, headers: request.headers, body: Buffer.concat(chunks).toString() };
      response.setHeader('set-cookie', 'app=1');
      response.end(`echo ${request.method} ${request.url} ${seen.body}`);
    });
  });
  const wss = new WebSocketServer({ server: upstream });
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send(`echo:${String(data)}`)));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
}

beforeEach(async () => {
  clock = manualClock(new Date().toISOString());
  h = await fakeHarness({ apiKeys: [KEY] }, clock.clock);
  h.backend.declare('ports');
  await startUpstream();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  api = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  expect((await h.app.inject({ method: 'POST', url: '/sandboxes', headers: auth, payload: { name: 'box' } })).statusCode).toBe(201);
});
afterEach(async () => {
  await h?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  upstream?.closeAllConnections();
});

describe('preview proxy (fake backend: ports on the loopback)', () => {
  it('forwards the path form with its body, without our key, with X-Forwarded-*, in an opaque origin', async () => {
    const response = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/a/b?x=1`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'hello' });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('echo POST /a/b?x=1 hello');
    expect(seen.headers?.authorization).toBeUndefined();
    expect(seen.headers?.['x-forwarded-host']).toBe(new URL(api).host);
    expect(seen.headers?.['x-forwarded-proto']).toBe('http');
    expect(seen.headers?.['x-forwarded-prefix']).toBe(`/sandboxes/box/ports/${upstreamPort}`);
    expect(seen.headers?.['x-forwarded-for']).toBe('127.0.0.1');
    expect(response.headers.get('content-security-policy')).toMatch(/^sandbox /);
    expect(response.headers.get('set-cookie')).toBe('app=1');

    const bare = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}`, { headers: { ...auth, 'x-api-key': 'kept' } });
    expect(await bare.text()).toBe('echo GET / ');
    expect(seen.headers?.['x-api-key']).toBe('kept');
    const started = performance.now();
    const streamed = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/slow`, { headers: auth });
    const reader = streamed.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('first ');
    expect(performance.now() - started).toBeLessThan(500);
    expect(Buffer.from((await reader.read()).value!).toString()).toBe('last');
    for (const method of ['HEAD', 'OPTIONS', 'PUT', 'PATCH', 'DELETE']) {
      const other = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/m`, { method, headers: auth });
      expect(other.status, method).toBe(200);
      expect(seen.method).toBe(method);
    }
  });

  it('sends a GET again when its kept-alive connection turns out closed', async () => {
    // Answers the first request of each connection and hangs up on the second, as a server
    // that closed an idle connection the proxy was about to reuse.
    const { createServer: createTcpServer } = await import('node:net');
    const flaky = createTcpServer((socket) => {
      let requests = 0;
      socket.on('data', () => {
        if (++requests > 1) return socket.destroy();
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
      });
    });
    await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
    const port = (flaky.address() as AddressInfo).port;
    try {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${api}/sandboxes/box/ports/${port}/`, { headers: auth });
        expect(await response.text()).toBe('ok');
      }
      const post = await fetch(`${api}/sandboxes/box/ports/${port}/`, { method: 'POST', headers: auth, body: 'x' });
      expect(post.status).toBe(502);
    } finally {
      flaky.close();
    }
  });

  it('forwards the host form whatever the path, with no opaque origin', async () => {
    const host = `${upstreamPort}-box.sandbox.localhost:${new URL(api).port}`;
    const real = await rawGet(`/sandboxes?q=1`, { ...auth, host });
    expect(real.status).toBe(200);
    expect(real.body).toBe('echo GET /sandboxes?q=1 ');
    expect(real.headers['content-security-policy']).toBeUndefined();
    expect(seen.headers?.host).toBe(host);
    expect(seen.headers?.['x-forwarded-prefix']).toBeUndefined();
    // The internal route is not reachable by its path.
    expect((await rawGet(`/_preview/${upstreamPort}/box/`, auth)).status).toBe(404);
  });

  it('answers 400 for ports outside 1-65535, 404, 409, 401 and 502 with clear messages', async () => {
    for (const port of ['0', '70000', 'http']) {
      const response = await fetch(`${api}/sandboxes/box/ports/${port}/`, { headers: auth });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: string }).error).toMatch(/port: '.*' must be a number from 1 to 65535/);
    }
    expect((await fetch(`${api}/sandboxes/nope/ports/80/`, { headers: auth })).status).toBe(404);
    const noKey = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/`);
    expect(noKey.status).toBe(401);
    const closed = await fetch(`${api}/sandboxes/box/ports/1/`, { headers: auth });
    expect(closed.status).toBe(502);
    expect(await closed.json()).toMatchObject({ code: 'BAD_GATEWAY', error: expect.stringMatching(/nothing listens on port 1/) });
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/box/stop', headers: auth })).statusCode).toBe(200);
    const stopped = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/`, { headers: auth });
    expect(stopped.status).toBe(409);
  });

  it('relays a WebSocket through both forms, and refuses one without a key', async () => {
    const path = `ws://127.0.0.1:${new URL(api).port}/sandboxes/box/ports/${upstreamPort}/ws`;
    expect(await echoOver(new WebSocket(path, { headers: auth }))).toBe('echo:ping');
    const host = `${upstreamPort}-box.sandbox.localhost:${new URL(api).port}`;
    expect(await echoOver(new WebSocket(`ws://127.0.0.1:${new URL(api).port}/ws`, { headers: { ...auth, host } }))).toBe('echo:ping');
    const refused = await new Promise<number>((resolve) => {
      const socket = new WebSocket(path);
      socket.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      socket.on('error', () => resolve(-1));
    });
    expect(refused).toBe(401);

    // Stopping the sandbox closes the WebSockets relayed to it.
    const open = new WebSocket(path, { headers: auth });
    await new Promise((resolve) => open.once('open', resolve));
    const closed = new Promise((resolve) => open.once('close', resolve));
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/box/stop', headers: auth })).statusCode).toBe(200);
    await closed;
  });

  it('mints signed URLs that work without the key, leave a cookie, and refuse tampering and expiry', async () => {
    const minted = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/url`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ expires_in: '10m' }) });
    expect(minted.status).toBe(200);
    const link = ((await minted.json()) as { data: { url: string; path_url: string; expires_at: string } }).data;
    expect(link.url).toMatch(new RegExp(`^http://${upstreamPort}-box\\.sandbox\\.localhost:\\d+/\\?exp=\\d+&sig=[\\w-]{43}$`));
    expect(Date.parse(link.expires_at) - clock.clock().getTime()).toBeGreaterThan(590_000);
    const defaulted = await fetch(`${api}/sandboxes/box/ports/${upstreamPort}/url`, { method: 'POST', headers: auth });
    expect(await defaulted.text()).toMatch(/"url"/);
    expect((await fetch(`${api}/sandboxes/box/ports/0/url`, { method: 'POST', headers: auth })).status).toBe(400);
    expect((await fetch(`${api}/sandboxes/nope/ports/80/url`, { method: 'POST', headers: auth })).status).toBe(404);

    // Host form, no key: the grant in the query is taken out before the sandbox sees the request.
    const query = new URL(link.url).search;
    const host = new URL(link.url).host;
    const first = await rawGet(`/page${query}&own=1`, { host });
    expect(first.status).toBe(200);
    expect(first.body).toBe('echo GET /page?own=1 ');
    const cookie = [first.headers['set-cookie']].flat().find((c) => c?.startsWith('sandboxd_preview='));
    expect(cookie).toMatch(/; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    // The page's own requests carry the cookie, which the sandbox never sees.
    const sub = await rawGet('/app.js', { host, cookie: `${cookie!.split(';')[0]}; theirs=2` });
    expect(sub.status).toBe(200);
    expect(seen.headers?.cookie).toBe('theirs=2');
    // The page's WebSocket carries the cookie too, and its Origin.
    const socket = new WebSocket(`ws://127.0.0.1:${new URL(api).port}/live`, { headers: { host, cookie: cookie!.split(';')[0]!, origin: `http://${host}` } });
    expect(await echoOver(socket)).toBe('echo:ping');
    // Path form with the same grant.
    expect((await fetch(link.path_url)).status).toBe(200);

    // Tampered: another signature, another port, another sandbox.
    const sig = new URL(link.url).searchParams.get('sig')!;
    const bad = query.replace(sig, `${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`);
    expect((await rawGet(`/${bad}`, { host })).status).toBe(401);
    expect((await fetch(`${api}/sandboxes/box/ports/${upstreamPort + 1}/${query}`)).status).toBe(401);
    expect((await rawGet(`/${query}`, { host: `${upstreamPort}-nope.sandbox.localhost` })).status).toBe(401);
    expect((await rawGet('/', { host, cookie: 'sandboxd_preview=1.x' })).status).toBe(401);

    clock.advance(11 * 60);
    const expired = await rawGet(`/${query}`, { host });
    expect(expired.status).toBe(403);
    expect(JSON.parse(expired.body).error).toMatch(/expired/);
  });
});

async function echoOver(socket: WebSocket): Promise<string> {
  return new Promise((resolve, reject) => {
    socket.on('open', () => socket.send('ping'));
    socket.on('message', (data) => {
      resolve(String(data));
      socket.close();
    });
    socket.on('error', reject);
  });
}

/** A GET to the API with any headers, Host included. */
const rawGet = (path: string, headers: Record<string, string>) => getWithHeaders(api, path, headers);
