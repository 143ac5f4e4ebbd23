import { validate } from '@readme/openapi-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

describe('authentication', () => {
  const KEYS = ['first-key-123', 'second-key-456'];

  it('leaves /health and /status open and guards everything else', async () => {
    h = await fakeHarness({ apiKeys: KEYS });
    expect((await h.app.inject({ url: '/health' })).statusCode).toBe(200);
    const status = await h.app.inject({ url: '/status' });
    expect(status.json()).toMatchObject({ success: true, data: { api_key_configured: true, backend: 'fake' } });
    for (const [method, url] of [
      ['GET', '/stats'],
      ['GET', '/sandboxes'],
      ['POST', '/sandboxes'],
      ['GET', '/openapi.json'],
      ['GET', '/no/such/route'],
    ] as const) {
      const res = await h.app.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json()).toEqual({ success: false, error: 'missing API key: send Authorization: Bearer <key>', code: 'UNAUTHORIZED' });
    }
  });

  it('accepts any configured key as Bearer or X-API-Key and refuses a wrong one', async () => {
    h = await fakeHarness({ apiKeys: KEYS });
    for (const headers of [
      { authorization: 'Bearer first-key-123' },
      { authorization: 'bearer second-key-456' },
      { 'x-api-key': 'second-key-456' },
    ]) {
      expect((await h.app.inject({ url: '/stats', headers })).statusCode).toBe(200);
    }
    for (const headers of [{ authorization: 'Bearer first-key-12' }, { authorization: 'Basic Zmlyc3Qta2V5LTEyMw==' }, { 'x-api-key': 'nope-nope' }]) {
      const res = await h.app.inject({ url: '/stats', headers });
      expect(res.statusCode).toBe(401);
      expect(res.json().success).toBe(false);
    }
  });

  it('needs no key when none is configured', async () => {
    h = await fakeHarness();
    expect((await h.app.inject({ url: '/sandboxes' })).statusCode).toBe(200);
    expect((await h.app.inject({ url: '/status' })).json().data.api_key_configured).toBe(false);
  });
});

describe('transport', () => {
  it('answers the health check with a bare body that envelope readers accept', async () => {
    h = await fakeHarness();
    expect((await h.app.inject({ url: '/health' })).json()).toEqual({ status: 'ok', success: true, data: 'ok' });
  });

  it('answers unknown routes with a JSON 404', async () => {
    h = await fakeHarness();
    const res = await h.app.inject({ method: 'POST', url: '/nothing/here?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ success: false, error: 'route POST /nothing/here not found', code: 'NOT_FOUND' });
  });

  it('refuses bodies over 16 MiB with 413', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'big' });
    const content = 'x'.repeat(16 * 1024 * 1024);
    const res = await h.app.inject({ method: 'PUT', url: '/sandboxes/big/files/tmp/f', payload: { content } });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ success: false, code: 'PAYLOAD_TOO_LARGE', error: 'request body exceeds the 16 MiB limit' });
    const under = await h.app.inject({ method: 'PUT', url: '/sandboxes/big/files/tmp/f', payload: { content: 'x'.repeat(15 * 1024 * 1024) } });
    expect(under.statusCode).toBe(200);
  });

  it('names what is wrong in malformed and mistyped bodies', async () => {
    h = await fakeHarness();
    const cases: [unknown, string][] = [
      ['{"name":', 'malformed JSON body'],
      [undefined, 'body: a JSON object is required'],
      [{ name: 'Upper' }, 'name: must match'],
      [{}, 'name: is required'],
      [{ name: 'ok', vcpus: 'two' }, 'vcpus: must be an integer'],
      [{ name: 'ok', memory_mb: 1.5 }, 'memory_mb: must be an integer'],
      [{ name: 'ok', profile: 'paranoid' }, 'profile: must be one of permissive, moderate, restrictive'],
      [{ name: 'ok', labels: { a: 1 } }, 'labels.a: label values must be strings'],
      [{ name: 'ok', ttl: '10 minutes' }, 'ttl: must be a duration like 30m'],
      [{ name: 'ok', env: { 'BAD-NAME': 'x' } }, 'environment variable names'],
      [{ name: 'ok', lifecycle: { auto_stop_after_seconds: -1 } }, 'lifecycle.auto_stop_after_seconds'],
      [{ name: 'ok', source_url: 'file:///etc' }, 'source_url: must be an https://, http://, ssh:// or git:// URL'],
      [{ name: 'ok', source_url: '--upload-pack=touch /tmp/x' }, 'source_url: must be'],
      [{ name: 'ok', source_url: 'https://example.com/r.git', source_ref: '--orphan' }, "source_ref: '--orphan' is not a valid git ref"],
      [{ name: 'ok', source_url: '/srv/repo' }, 'source_url'],
      [{ name: 'ok', source_ref: 'main' }, 'source_ref: needs source_url'],
      [{ name: 'ok', vcpus: 4096 }, 'vcpus: at most'],
      [{ name: 'ok', colour: 'red' }, "unknown field 'colour'"],
    ];
    for (const [payload, message] of cases) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/sandboxes',
        headers: { 'content-type': 'application/json' },
        payload: typeof payload === 'string' || payload === undefined ? payload : JSON.stringify(payload),
      });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().code).toBe('BAD_REQUEST');
      expect(res.json().error).toContain(message);
    }
    expect(h.backend.instances.size).toBe(0);
  });

  it('accepts empty bodies on action routes and JSON sent without a JSON content type', async () => {
    h = await fakeHarness();
    const created = await h.app.inject({ method: 'POST', url: '/sandboxes', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '{"name":"curl"}' });
    expect(created.statusCode).toBe(201);
    const stop = await h.app.inject({ method: 'POST', url: '/sandboxes/curl/stop', headers: { 'content-type': 'application/json' } });
    expect(stop.statusCode).toBe(200);
  });

  it('serves an OpenAPI 3.1 document that a validator accepts', async () => {
    h = await fakeHarness();
    const doc = (await h.app.inject({ url: '/openapi.json' })).json();
    expect(doc.openapi).toBe('3.1.0');
    await expect(validate(structuredClone(doc))).resolves.toMatchObject({ valid: true });
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/health',
        '/status',
        '/stats',
        '/sandboxes',
        '/sandboxes/{name}',
        '/sandboxes/by-uuid/{uuid}',
        '/sandboxes/{name}/exec',
        '/sandboxes/{name}/files/{path}',
        '/sandboxes/{name}/files',
        '/sandboxes/{name}/logs',
        '/sandboxes/{name}/start',
        '/sandboxes/{name}/stop',
        '/sandboxes/{name}/recover',
        '/sandboxes/{name}/resize',
        '/sandboxes/{name}/extend',
        '/gc',
        '/lifecycle/reconcile',
        '/snapshots',
        '/snapshots/{name}',
        '/snapshots/{name}/restore',
      ]),
    );
    const create = doc.paths['/sandboxes'].post;
    expect(create.requestBody.content['application/json'].schema).toBeDefined();
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '409', '429']));
  });
});
