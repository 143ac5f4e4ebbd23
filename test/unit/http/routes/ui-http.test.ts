import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileUnder } from '../../../../src/http/routes/ui-routes.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

const KEY = 'ui-test-key-123';
const SECRET = 'not for the browser';

let h: FakeHarness;
let base: string;
let top: string;

/** A GET over a real socket with the path sent exactly as written (no client-side normalising). */
function rawGet(path: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; body: string; location?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body, location: res.headers.location }));
    });
    // node's client keeps the path as given, dots and percent-escapes included.
    req.path = path;
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  top = mkdtempSync(join(tmpdir(), 'sandboxd-ui-'));
  const webRoot = join(top, 'web');
  mkdirSync(join(webRoot, 'assets'), { recursive: true });
  writeFileSync(join(webRoot, 'index.html'), '<!doctype html><title>dash</title>');
  writeFileSync(join(webRoot, 'assets', 'app-1234.js'), 'console.log(1)');
  writeFileSync(join(top, 'secret.txt'), SECRET);
  writeFileSync(join(top, 'web-secret.txt'), SECRET);
  h = await fakeHarness({ apiKeys: [KEY] }, undefined, undefined, { webRoot });
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await h?.close();
  rmSync(top, { recursive: true, force: true });
});

describe('the dashboard\'s static files', () => {
  it('serves /ui/ and its assets without a key, with types and caching', async () => {
    const index = await rawGet('/ui/');
    expect(index).toMatchObject({ status: 200, type: 'text/html; charset=utf-8' });
    expect(index.body).toContain('<title>dash</title>');
    const asset = await rawGet('/ui/assets/app-1234.js');
    expect(asset).toMatchObject({ status: 200, type: 'text/javascript; charset=utf-8', body: 'console.log(1)' });
    const head = await h.app.inject({ url: '/ui/assets/app-1234.js' });
    expect(head.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await h.app.inject({ url: '/ui/' })).headers['cache-control']).toBe('no-cache');
    expect((await h.app.inject({ method: 'HEAD', url: '/ui/assets/app-1234.js' })).statusCode).toBe(200);
  });

  it('serves the API reference page at /docs without a key; its document still needs one', async () => {
    expect(await rawGet('/docs')).toMatchObject({ status: 200, type: 'text/html; charset=utf-8' });
    expect((await rawGet('/openapi.json')).status).toBe(401);
    expect((await rawGet('/openapi.json', { authorization: `Bearer ${KEY}` })).status).toBe(200);
  });

  it('keeps every API route behind the key', async () => {
    for (const path of ['/sandboxes', '/stats', '/events', '/snapshots', '/stores']) {
      expect((await rawGet(path)).status, path).toBe(401);
    }
    expect((await rawGet('/sandboxes', { authorization: `Bearer ${KEY}` })).status).toBe(200);
  });

  it('sends browsers from / to /ui/ and answers other clients with a JSON 404', async () => {
    const browser = await rawGet('/', { accept: 'text/html,application/xhtml+xml' });
    expect(browser).toMatchObject({ status: 302, location: '/ui/' });
    expect(await rawGet('/ui')).toMatchObject({ status: 302, location: '/ui/' });
    const api = await rawGet('/', { accept: 'application/json' });
    expect(api.status).toBe(404);
    expect(JSON.parse(api.body)).toMatchObject({ success: false, code: 'NOT_FOUND' });
  });

  it('answers a missing file with a JSON 404 naming it', async () => {
    const missing = await rawGet('/ui/nope.js');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body)).toEqual({ success: false, error: 'no file /ui/nope.js', code: 'NOT_FOUND' });
  });

  it.each([
    '/ui/../secret.txt',
    '/ui/../../secret.txt',
    '/ui/assets/../../secret.txt',
    '/ui/..%2fsecret.txt',
    '/ui/%2e%2e/secret.txt',
    '/ui/%2e%2e%2fsecret.txt',
    '/ui/%2E%2E%2Fsecret.txt',
    '/ui/assets/..%2f..%2fsecret.txt',
    '/ui/%252e%252e%252fsecret.txt',
    '/ui/..%5csecret.txt',
    '/ui/%2fetc%2fpasswd',
    '/ui//etc/passwd',
    '/ui/../web-secret.txt',
    '/ui/../package.json',
    '/ui/%00',
    '/ui/index.html%00.js',
  ])('refuses %s', async (path) => {
    const res = await rawGet(path);
    expect(res.status === 404 || res.status === 400, `${path}: ${res.status}`).toBe(true);
    expect(res.body).not.toContain(SECRET);
    expect(res.body).not.toContain('root:');
    expect(res.type).toContain('application/json');
  });
});

describe('fileUnder', () => {
  it('keeps paths inside the root and refuses the rest', () => {
    expect(fileUnder('/srv/web', 'index.html')).toBe('/srv/web/index.html');
    expect(fileUnder('/srv/web', 'assets/a.js')).toBe('/srv/web/assets/a.js');
    expect(fileUnder('/srv/web', '/etc/passwd')).toBe('/srv/web/etc/passwd');
    for (const bad of ['../x', 'a/../../x', '..', '', '.', 'a\0b', '../web-other/x']) expect(fileUnder('/srv/web', bad), bad).toBeUndefined();
  });
});
