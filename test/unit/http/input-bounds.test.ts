import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

async function withSandbox(): Promise<FakeHarness> {
  h = await fakeHarness();
  expect((await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'box' } })).statusCode).toBe(201);
  return h;
}

describe('path parameters', () => {
  it('answers 400 naming name for NUL and other control characters in {name}', async () => {
    await withSandbox();
    for (const name of ['a%00b', 'box%00', '%0a', 'a%1fb', '%7f', 'b%C3%B6x', 'a%2Fb']) {
      for (const [method, url, payload] of [
        ['POST', `/sandboxes/${name}/exec`, { command: ['true'] }],
        ['GET', `/sandboxes/${name}`, undefined],
        ['PUT', `/sandboxes/${name}/files/workspace/a`, { content: 'x' }],
        ['POST', `/sandboxes/${name}/extend`, {}],
      ] as const) {
        const res = await h.app.inject({ method, url, ...(payload ? { payload } : {}) });
        expect(res.statusCode, `${method} ${url}`).toBe(400);
        expect(res.json().error, `${method} ${url}`).toMatch(/^name: /);
      }
    }
  });

  it('answers a path that is not valid percent-encoding with the error envelope', async () => {
    await withSandbox();
    const res = await h.app.inject({ method: 'POST', url: '/sandboxes/%ZZ/exec', payload: { command: ['true'] } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, error: "path: '/sandboxes/%ZZ/exec' is not valid percent-encoding", code: 'BAD_REQUEST' });
  });

  it('answers a path parameter past 100 characters with a 400, not a 500', async () => {
    await withSandbox();
    for (const url of [`/sandboxes/${'a'.repeat(101)}/exec/detached/x`, `/sandboxes/box/exec/detached/${'%25EF'.repeat(40)}`]) {
      const res = await h.app.inject({ method: 'DELETE', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toEqual({ success: false, error: 'path: a parameter of the path is longer than 100 characters', code: 'BAD_REQUEST' });
    }
  });
});

describe('durations', () => {
  it('refuses ttl and by past 365d with a 400 naming the field and the maximum', async () => {
    await withSandbox();
    const ttl = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'long', ttl: '99999999d' } });
    expect(ttl.statusCode).toBe(400);
    expect(ttl.json().error).toBe('ttl: must be at most 365d');
    const by = await h.app.inject({ method: 'POST', url: '/sandboxes/box/extend', payload: { by: '366d' } });
    expect(by.statusCode).toBe(400);
    expect(by.json().error).toBe('by: must be at most 365d');
    for (const [payload, expected] of [
      [{ name: 'a', ttl: '365d' }, 201],
      [{ name: 'b', ttl: '8760h' }, 201],
      [{ name: 'c', ttl: '8761h' }, 400],
      [{ name: 'd', ttl: '31536001s' }, 400],
    ] as const) {
      expect((await h.app.inject({ method: 'POST', url: '/sandboxes', payload })).statusCode, JSON.stringify(payload)).toBe(expected);
    }
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/box/extend', payload: { by: '365d' } })).statusCode).toBe(200);
  });
});

describe('file paths', () => {
  it('refuses paths past PATH_MAX and names past NAME_MAX with a 400', async () => {
    await withSandbox();
    const longName = 'n'.repeat(256);
    const deep = Array.from({ length: 20 }, () => 'd'.repeat(250)).join('/');
    for (const path of [`workspace/${longName}`, `workspace/${deep}`]) {
      const put = await h.app.inject({ method: 'PUT', url: `/sandboxes/box/files/${path}`, payload: { content: 'x' } });
      expect(put.statusCode).toBe(400);
      expect(put.json().error).toMatch(/^path: /);
      expect((await h.app.inject({ url: `/sandboxes/box/files/${path}` })).statusCode).toBe(400);
    }
    const many = await h.app.inject({ method: 'POST', url: '/sandboxes/box/files', payload: { files: { [longName]: 'x' } } });
    expect(many.statusCode).toBe(400);
    expect((await h.app.inject({ method: 'PUT', url: `/sandboxes/box/files/workspace/${'n'.repeat(255)}`, payload: { content: 'x' } })).statusCode).toBe(200);
  });

  it('writes and deletes nothing under /dev, /proc or /sys: a 400 that says why', async () => {
    await withSandbox();
    for (const path of ['dev/full', 'dev/null', 'proc/sys/kernel/hostname', 'sys/kernel/x', 'dev']) {
      const put = await h.app.inject({ method: 'PUT', url: `/sandboxes/box/files/${path}`, payload: { content: 'x' } });
      expect(put.statusCode, path).toBe(400);
      expect(put.json().error).toMatch(/devices and kernel state/);
      expect((await h.app.inject({ method: 'DELETE', url: `/sandboxes/box/files/${path}` })).statusCode, path).toBe(400);
    }
    expect((await h.app.inject({ method: 'PUT', url: '/sandboxes/box/files/devices/x', payload: { content: 'x' } })).statusCode).toBe(200);
  });
});

describe('nesting', () => {
  /** `{"a":{"a":...}}` and `[[...]]`, `depth` levels deep. */
  const nested = (depth: number, array = false) => (array ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth));

  it('answers a body nested past 64 levels with a 400 naming the limit on every route that takes JSON, before any walk of it', async () => {
    h = await fakeHarness();
    const routes: [string, string, (inner: string) => string][] = [
      ['POST', '/stores', (inner) => `{"name":"s","kind":"kv","config":${inner}}`],
      ['POST', '/objects/classes', (inner) => `{"name":"C","runtime":"node","source":"x","sandbox":${inner}}`],
      ['POST', '/schedules', (inner) => `{"name":"s","cron":"* * * * *","target":${inner}}`],
      ['POST', '/orchestrations/definitions', (inner) => `{"name":"o","steps":${inner}}`],
      ['POST', '/orchestrations', (inner) => `{"name":"o","input":${inner}}`],
      ['POST', '/sandboxes', (inner) => `{"name":"x","labels":${inner}}`],
    ];
    for (const [method, url, body] of routes) {
      for (const inner of [nested(10_000), nested(100_000, true), nested(65)]) {
        const reply = await h.app.inject({ method, url, payload: body(inner), headers: { 'content-type': 'application/json' } });
        expect([url, reply.statusCode, reply.json()]).toEqual([url, 400, { success: false, error: 'body: nested deeper than 64 levels of arrays and objects', code: 'BAD_REQUEST' }]);
      }
    }
  });

  it('lets 64 levels through to validation, and counts brackets inside strings as text', async () => {
    h = await fakeHarness();
    const deep = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: `{"name":"x","labels":${nested(63)}}`, headers: { 'content-type': 'application/json' } });
    expect(deep.statusCode).toBe(400);
    expect(deep.json().error).not.toContain('nested deeper');
    const text = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: JSON.stringify({ name: 'x', description: '['.repeat(70) + '\\"{'.repeat(10) }) });
    expect(text.statusCode).toBe(201);
  });
});
