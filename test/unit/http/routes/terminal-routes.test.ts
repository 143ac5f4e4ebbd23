import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

const KEY = 'terminal-unit-key-0123';
const auth = { authorization: `Bearer ${KEY}` };
const time = manualClock();
let h: FakeHarness;

beforeAll(async () => {
  h = await fakeHarness({ apiKeys: [KEY] }, time.clock);
  for (const name of ['term-a', 'term-b', 'term-stopped']) {
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes', headers: auth, payload: { name } })).statusCode).toBe(201);
  }
  expect((await h.app.inject({ method: 'POST', url: '/sandboxes/term-stopped/stop', headers: auth })).statusCode).toBe(200);
});

afterAll(async () => {
  await h.close();
});

const mint = async (name: string) => h.app.inject({ method: 'POST', url: `/sandboxes/${name}/pty/token`, headers: auth });
const openPty = (query: string, headers: Record<string, string> = {}) => h.app.inject({ method: 'GET', url: `/sandboxes/term-a/pty${query}`, headers });

describe('terminal tokens', () => {
  it('mints a token valid 60 s for a running sandbox; 404 unknown, 409 stopped, 401 without a key', async () => {
    const minted = await mint('term-a');
    expect(minted.statusCode).toBe(200);
    expect(Date.parse(minted.json().data.expires_at) - time.clock().getTime()).toBe(60_000);
    expect((await mint('no-such')).statusCode).toBe(404);
    expect((await mint('term-stopped')).statusCode).toBe(409);
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/term-a/pty/token' })).statusCode).toBe(401);
  });

  it('stands in for the key once, for its sandbox only, until it expires', async () => {
    const { token } = (await mint('term-a')).json().data;
    // Accepted (the route then wants a WebSocket), then spent.
    const first = await openPty(`?token=${token}`);
    expect(first.statusCode).toBe(400);
    expect(first.json().error).toContain('WebSocket');
    const again = await openPty(`?token=${token}`);
    expect(again.statusCode).toBe(401);
    expect(again.json().error).toContain('used already');

    const other = (await mint('term-b')).json().data.token;
    const elsewhere = await openPty(`?token=${other}`);
    expect(elsewhere.statusCode).toBe(401);
    expect(elsewhere.json().error).toContain("minted for sandbox 'term-b'");

    const late = (await mint('term-a')).json().data.token;
    time.advance(61);
    const expired = await openPty(`?token=${late}`);
    expect(expired.statusCode).toBe(401);
    expect(expired.json().error).toContain('expired');
    expect((await openPty('')).statusCode).toBe(401);
  });

  it('checks the size before anything else', async () => {
    const bad = await openPty('?cols=0&rows=5000', auth);
    expect(bad.statusCode).toBe(400);
    expect((await openPty('?colour=1', auth)).statusCode).toBe(400);
  });
});

describe('the terminal WebSocket route', () => {
  it('is documented as a GET answering 101, with operation ids', async () => {
    const doc = (await h.app.inject({ url: '/openapi.json', headers: auth })).json();
    const get = doc.paths['/sandboxes/{name}/pty'].get;
    expect(get.operationId).toBe('openTerminal');
    expect(Object.keys(get.responses)).toContain('101');
    expect(doc.paths['/sandboxes/{name}/pty/token'].post.operationId).toBe('mintTerminalToken');
  });

  it('answers a refused upgrade over HTTP: 422 where the backend has no terminals, 409 stopped, 401 no key', async () => {
    const url = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const status = (path: string, headers: Record<string, string> = auth) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(url.replace('http', 'ws') + path, { headers });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => (ws.close(), resolve(101)));
        ws.once('error', () => resolve(-1));
      });
    expect(await status('/sandboxes/term-a/pty')).toBe(422);
    expect(await status('/sandboxes/term-stopped/pty')).toBe(409);
    expect(await status('/sandboxes/no-such/pty')).toBe(404);
    expect(await status('/sandboxes/term-a/pty', {})).toBe(401);
    // Other routes answer an upgrade request as a plain request, then close.
    expect(await status('/health', {})).toBe(200);
  });
});
