import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

const KEY = 'preview-access-key';
const auth = { authorization: `Bearer ${KEY}` };

let h: FakeHarness;
let upstream: Server;
let port: number;
/** Every request and upgrade the sandbox's server saw, as `METHOD path`. */
const seen: string[] = [];
/** The host form's host of the sandbox `box` (and of `other`), and the grants each got. */
let host: string;
let otherHost: string;
let grant: { cookie: string; query: string };
let otherGrant: { cookie: string; query: string };

/** A signed grant of `name`'s port, as its cookie (`sandboxd_preview=<exp>.<sig>`) and its query. */
async function grantOf(name: string): Promise<{ cookie: string; query: string }> {
  const { url } = await h.services.preview.mint(name, String(port), '1h', { protocol: 'http', host: '127.0.0.1:18888' });
  const query = new URL(url).searchParams;
  return { cookie: `sandboxd_preview=${query.get('exp')}.${query.get('sig')}`, query: `?exp=${query.get('exp')}&sig=${query.get('sig')}` };
}

beforeAll(async () => {
  h = await fakeHarness({ apiKeys: [KEY] });
  h.backend.declare('ports');
  upstream = createServer((request, response) => {
    seen.push(`${request.method} ${request.url}`);
    request.resume();
    request.on('end', () => response.end('from the sandbox'));
  });
  new WebSocketServer({ server: upstream }).on('connection', (socket, request) => {
    seen.push(`WS ${request.url}`);
    socket.on('message', (data) => socket.send(`echo:${String(data)}`));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = (upstream.address() as AddressInfo).port;
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  for (const name of ['box', 'other']) expect((await h.app.inject({ method: 'POST', url: '/sandboxes', headers: auth, payload: { name } })).statusCode).toBe(201);
  const apiPort = (h.app.server.address() as AddressInfo).port;
  host = `${port}-box.sandbox.localhost:${apiPort}`;
  otherHost = `${port}-other.sandbox.localhost:${apiPort}`;
  grant = await grantOf('box');
  otherGrant = await grantOf('other');
});
afterAll(async () => {
  await h?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** A request to box's host form through app.inject: its status, and whether the sandbox's server saw it. */
async function send(method: 'GET' | 'POST', path: string, headers: Record<string, string>): Promise<{ status: number; error?: string; reached: boolean }> {
  const before = seen.length;
  const response = await h.app.inject({ method, url: path, headers: { host, ...headers }, ...(method === 'POST' ? { payload: 'x=1' } : {}) });
  const error = response.statusCode === 200 ? undefined : (response.json() as { error: string }).error;
  return { status: response.statusCode, ...(error ? { error } : {}), reached: seen.length > before };
}

/** Opens a WebSocket to `path` on box's host form: its echo, or the HTTP status it was refused with. */
async function openSocket(path: string, headers: Record<string, string>): Promise<string | number> {
  const socket = new WebSocket(`ws://127.0.0.1:${(h.app.server.address() as AddressInfo).port}${path}`, { headers: { host, ...headers } });
  return new Promise((resolve, reject) => {
    socket.on('open', () => socket.send('ping'));
    socket.on('message', (data) => {
      resolve(String(data));
      socket.close();
    });
    socket.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
    socket.on('error', reject);
  });
}

describe('the preview cookie comes from the preview itself', () => {
  it('refuses a request another origin sends with the cookie: Origin, Sec-Fetch-Site same-site and cross-site', async () => {
    const foreign = `http://${otherHost}`;
    const attacks: Array<['GET' | 'POST', Record<string, string>]> = [
      // A fetch or form from another preview, in a browser without Fetch Metadata.
      ['POST', { origin: foreign }],
      // Sandboxed pages (the path form) send `Origin: null`.
      ['POST', { origin: 'null' }],
      ['POST', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors', origin: foreign }],
      ['POST', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: 'http://elsewhere.example' }],
      // A form posted from another preview navigates, but with a method that is not safe.
      ['POST', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'navigate', origin: foreign }],
      // A credentialed fetch GET: its answer would be the other origin's to read if the app allowed it.
      ['GET', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'cors', origin: foreign }],
      ['GET', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' }],
    ];
    for (const [method, headers] of attacks) {
      const result = await send(method, '/poke', { cookie: grant.cookie, ...headers });
      expect(result, JSON.stringify(headers)).toMatchObject({ status: 403, reached: false });
      expect(result.error).toMatch(/the preview cookie is taken only from the preview's own pages, and this is a .*: send the API key or the signed URL/);
    }
    expect((await send('POST', '/poke', { cookie: grant.cookie, origin: foreign })).error).toContain(`a request from ${foreign}`);
  });

  it('lets in the preview own requests, navigations, and requests without browser headers', async () => {
    const own = `http://${host}`;
    const allowed: Array<['GET' | 'POST', Record<string, string>]> = [
      ['POST', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', origin: own }],
      // A page with `Referrer-Policy: no-referrer` posts with `Origin: null`: Fetch Metadata decides.
      ['POST', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', origin: 'null' }],
      ['POST', { origin: own }],
      // The scheme's default port is the same origin, written or not.
      ['POST', { origin: `http://${host.replace(/:\d+$/, '')}`, host: `${host.replace(/:\d+$/, '')}:80` }],
      ['GET', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'no-cors' }],
      // A link or a typed address: a navigation with a safe method, from anywhere.
      ['GET', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'navigate' }],
      ['GET', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }],
      ['GET', { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate' }],
      // curl and other clients send neither header.
      ['POST', {}],
    ];
    for (const [method, headers] of allowed) {
      expect(await send(method, '/own', { cookie: grant.cookie, ...headers }), JSON.stringify(headers)).toEqual({ status: 200, reached: true });
    }
  });

  it('leaves requests with the API key or a signed URL as they were, whatever their origin', async () => {
    const foreign = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: 'http://elsewhere.example' };
    expect(await send('POST', '/keyed', { ...auth, cookie: grant.cookie, ...foreign })).toEqual({ status: 200, reached: true });
    expect(await send('POST', `/signed${grant.query}`, foreign)).toEqual({ status: 200, reached: true });
    // A bad cookie is still a 401, from anywhere.
    expect(await send('POST', '/forged', { cookie: 'sandboxd_preview=1.x', ...foreign })).toMatchObject({ status: 401, reached: false });
  });

  it('takes this preview cookie among several of the same name (one set by another host of the site)', async () => {
    const tossed = `${otherGrant.cookie}; ${grant.cookie}`;
    expect(await send('GET', '/two', { cookie: tossed, 'sec-fetch-site': 'same-origin' })).toEqual({ status: 200, reached: true });
    expect(await send('POST', '/two', { cookie: tossed, 'sec-fetch-site': 'same-site', origin: `http://${otherHost}` })).toMatchObject({ status: 403, reached: false });
  });

  it('takes a WebSocket with the cookie only with the preview own Origin', async () => {
    expect(await openSocket('/live', { cookie: grant.cookie, origin: `http://${host}` })).toBe('echo:ping');
    const before = seen.length;
    expect(await openSocket('/live', { cookie: grant.cookie, origin: `http://${otherHost}` })).toBe(403);
    expect(await openSocket('/live', { cookie: grant.cookie, origin: 'null' })).toBe(403);
    expect(await openSocket('/live', { cookie: grant.cookie })).toBe(403);
    expect(seen.length).toBe(before);
    // With the key or the signed URL, the Origin is not ours to judge.
    expect(await openSocket('/live', { ...auth, origin: `http://${otherHost}` })).toBe('echo:ping');
    expect(await openSocket(`/live${grant.query}`, { origin: `http://${otherHost}` })).toBe('echo:ping');
  });

  it('sets the cookie host-only, for this preview alone', async () => {
    const first = await h.app.inject({ method: 'GET', url: `/${grant.query}`, headers: { host } });
    const cookie = [first.headers['set-cookie']].flat().find((c) => c?.startsWith('sandboxd_preview='));
    // No Domain: the browser sends it to this host alone, not to the other previews of the domain.
    expect(cookie).toMatch(/^sandboxd_preview=\d+\.[\w-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    const path = await h.app.inject({ method: 'GET', url: `/sandboxes/box/ports/${port}/${grant.query}`, headers: { host: '127.0.0.1' } });
    expect([path.headers['set-cookie']].flat().find((c) => c?.startsWith('sandboxd_preview='))).toMatch(new RegExp(`; Path=/sandboxes/box/ports/${port}/;`));
    // On the path form the page runs in an opaque origin: the cookie is taken from the API's own pages only.
    const sandboxed = await h.app.inject({ method: 'POST', url: `/sandboxes/box/ports/${port}/x`, headers: { host: '127.0.0.1', cookie: grant.cookie, origin: 'null', 'sec-fetch-site': 'cross-site' } });
    expect(sandboxed.statusCode).toBe(403);
    const ownPage = await h.app.inject({ method: 'POST', url: `/sandboxes/box/ports/${port}/x`, headers: { host: '127.0.0.1', cookie: grant.cookie, origin: 'http://127.0.0.1', 'sec-fetch-site': 'same-origin' } });
    expect(ownPage.statusCode).toBe(200);
  });
});
