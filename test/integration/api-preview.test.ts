import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { getWithHeaders } from '../helpers/host-request.js';
import { upload } from '../helpers/preview-upload.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

const KEY = 'preview-integration-key';
const auth = { authorization: `Bearer ${KEY}` };
const WS_ECHO = readFileSync(join(import.meta.dirname, 'fixtures', 'ws-echo.py'), 'utf8');
const UNREAD = readFileSync(join(import.meta.dirname, 'fixtures', 'unread-upload.py'), 'utf8');
const UNREAD_COMMAND = 'python3 /tmp/unread-upload.py 8003 /tmp/unread.log';
/** An upload larger than every buffer on its way: it backs up against a server that does not read it. */
const LARGE = 256 * 1024 * 1024;

let rt: DockerRuntime;
const name = uniqueName('preview');
const closed = uniqueName('preview-restrictive');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body, auth);

/** Starts a server in a sandbox as a detached command and waits until the proxy reaches it (at `path`). */
async function serve(sandbox: string, command: string, port: number, path = '/'): Promise<void> {
  const started = await api('POST', `/sandboxes/${sandbox}/exec/detach`, { command: ['sh', '-c', command] });
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  for (let i = 0; i < 100; i++) {
    const response = await fetch(`${rt.url}/sandboxes/${sandbox}/ports/${port}${path}`, { headers: auth });
    await response.arrayBuffer();
    if (response.status !== 502) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on port ${port} in ${sandbox}`);
}

/** A GET to the API with any headers, Host included. */
const rawGet = (path: string, headers: Record<string, string>) => getWithHeaders(rt.url, path, headers);

beforeAll(async () => {
  rt = await dockerRuntime({ apiKeys: [KEY] });
  expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
  expect((await api('POST', '/sandboxes', { name: closed, profile: 'restrictive' })).status).toBe(201);
  for (const sandbox of [name, closed]) {
    const files = { '/tmp/site/index.html': `hello from ${sandbox}\n`, '/tmp/ws-echo.py': WS_ECHO, '/tmp/unread-upload.py': UNREAD };
    expect((await api('POST', `/sandboxes/${sandbox}/files`, { files })).status).toBe(200);
  }
  await serve(name, 'python3 -m http.server 8000 --bind 0.0.0.0 --directory /tmp/site', 8000);
  await serve(name, 'python3 -m http.server 8001 --bind 127.0.0.1 --directory /tmp/site', 8001);
  await serve(name, 'python3 /tmp/ws-echo.py 0.0.0.0 8002', 8002);
  await serve(name, UNREAD_COMMAND, 8003, '/ready');
  await serve(closed, 'python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site', 8000);
}, 300_000);
afterAll(async () => {
  await rt?.dispose();
});

describe('preview URLs on Docker', () => {
  it('reaches a server in the sandbox through the path form and the host form', async () => {
    const path = await fetch(`${rt.url}/sandboxes/${name}/ports/8000/index.html`, { headers: auth });
    expect(path.status).toBe(200);
    expect(await path.text()).toBe(`hello from ${name}\n`);
    const host = await rawGet('/index.html', { ...auth, host: `8000-${name}.sandbox.localhost:${new URL(rt.url).port}` });
    expect(host.status).toBe(200);
    expect(host.body).toBe(`hello from ${name}\n`);
  });

  it('reaches a server bound to the sandbox loopback only, and one in a sandbox without a network', async () => {
    const loopback = await fetch(`${rt.url}/sandboxes/${name}/ports/8001/index.html`, { headers: auth });
    expect(loopback.status).toBe(200);
    const restrictive = await fetch(`${rt.url}/sandboxes/${closed}/ports/8000/index.html`, { headers: auth });
    expect(restrictive.status).toBe(200);
    expect(await restrictive.text()).toBe(`hello from ${closed}\n`);
  });

  it('relays a WebSocket echo', async () => {
    const socket = new WebSocket(`${rt.url.replace('http', 'ws')}/sandboxes/${name}/ports/8002/`, { headers: auth });
    const echoed = await new Promise<string>((resolve, reject) => {
      socket.on('open', () => socket.send('ping'));
      socket.on('message', (data) => resolve(String(data)));
      socket.on('error', reject);
    });
    socket.close();
    expect(echoed).toBe('echo:ping');
  });

  it('mints signed URLs that work without the key; tampered and expired ones are refused', async () => {
    const minted = await api('POST', `/sandboxes/${name}/ports/8000/url`, { expires_in: '2s' });
    expect(minted.status).toBe(200);
    const { url, path_url } = minted.body.data as { url: string; path_url: string };
    const signed = new URL(url);
    const viaHost = await rawGet(`/index.html${signed.search}`, { host: signed.host });
    expect(viaHost.status).toBe(200);
    expect(viaHost.body).toBe(`hello from ${name}\n`);
    expect((await fetch(path_url)).status).toBe(200);
    const tampered = signed.search.replace(/exp=(\d+)/, (_all, exp: string) => `exp=${Number(exp) + 60}`);
    expect((await rawGet(`/${tampered}`, { host: signed.host })).status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect((await rawGet(`/${signed.search}`, { host: signed.host })).status).toBe(403);
  });

  it('closes the connection of an upload the app answered without reading it', async () => {
    const sending = upload(rt.url, `/sandboxes/${name}/ports/8003/early`, auth, LARGE, 64 * 1024);
    expect(await sending.closed).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nno\n$/);
  });

  it('closes the connections of uploads under way when their sandbox is deleted', async () => {
    const doomed = uniqueName('preview-doomed');
    expect((await api('POST', '/sandboxes', { name: doomed })).status).toBe(201);
    expect((await api('POST', `/sandboxes/${doomed}/files`, { files: { '/tmp/unread-upload.py': UNREAD } })).status).toBe(200);
    await serve(doomed, UNREAD_COMMAND, 8003, '/ready');
    const waiting = upload(rt.url, `/sandboxes/${doomed}/ports/8003/never`, auth, LARGE, 64 * 1024);
    // Under way: the app has the request, and will never answer.
    await expect.poll(async () => (await api('POST', `/sandboxes/${doomed}/exec`, { command: ['cat', '/tmp/unread.log'] })).body.data?.stdout, { timeout: 30_000 }).toContain('/never');
    expect((await api('DELETE', `/sandboxes/${doomed}`)).status).toBe(200);
    // Closed by the delete: not left open until the request time-out cuts it (with a 408 after the sandbox's 502).
    expect(await waiting.closed).not.toMatch(/HTTP\/1\.1 408 /);
  });

  it('answers 400 for ports outside 1-65535, 401 without a key, 502 when nothing listens, 409 once stopped', async () => {
    for (const port of [0, 70000]) expect((await fetch(`${rt.url}/sandboxes/${name}/ports/${port}/`, { headers: auth })).status).toBe(400);
    expect((await fetch(`${rt.url}/sandboxes/${name}/ports/8000/`)).status).toBe(401);
    const nothing = await fetch(`${rt.url}/sandboxes/${name}/ports/9/`, { headers: auth });
    expect(nothing.status).toBe(502);
    expect(((await nothing.json()) as { error: string }).error).toMatch(/nothing listens on port 9/);
    expect((await api('POST', `/sandboxes/${closed}/stop`)).status).toBe(200);
    expect((await fetch(`${rt.url}/sandboxes/${closed}/ports/8000/`, { headers: auth })).status).toBe(409);
  });
});
