import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

const KEY = 'observability-test-key';
const auth = { authorization: `Bearer ${KEY}` };
const EVENTS_ON = { enabled: true, backlog: 100, webhookUrls: [] };

let harness: FakeHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('GET /events (errors; the stream itself is tested over a socket in test/integration)', () => {
  it('answers 503 saying how to turn the bus on when it is off', async () => {
    harness = await fakeHarness();
    const res = await harness.app.inject({ method: 'GET', url: '/events' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ success: false, code: 'EVENTS_DISABLED' });
    expect(res.json().error).toMatch(/--events.*--webhook-url.*--otel-endpoint/);
    // GET /status says so first, so a client (the dashboard) need not ask for a 503.
    expect((await harness.app.inject({ method: 'GET', url: '/status' })).json().data.events_enabled).toBe(false);
  });

  it('is announced by GET /status when the bus is on', async () => {
    harness = await fakeHarness({ apiKeys: [KEY] }, undefined, EVENTS_ON);
    expect((await harness.app.inject({ method: 'GET', url: '/status' })).json().data).toMatchObject({ events_enabled: true, api_key_configured: true });
  });

  it('needs a key when auth is on', async () => {
    harness = await fakeHarness({ apiKeys: [KEY] }, undefined, EVENTS_ON);
    const res = await harness.app.inject({ method: 'GET', url: '/events' });
    expect(res.statusCode).toBe(401);
  });

  it('rejects bad filters and a bad Last-Event-ID, naming them', async () => {
    harness = await fakeHarness({}, undefined, EVENTS_ON);
    const cases: [string, Record<string, string>, RegExp][] = [
      ['/events?sandbox=Bad%20Name', {}, /^sandbox: must match/],
      ['/events?type=sandbox.exploded', {}, /^type: must be one of sandbox\.created/],
      ['/events?colour=red', {}, /unknown field 'colour'/],
      ['/events', { 'last-event-id': 'yesterday' }, /^last-event-id: must be the id of an event/],
    ];
    for (const [url, headers, message] of cases) {
      const res = await harness.app.inject({ method: 'GET', url, headers });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error, url).toMatch(message);
    }
  });
});

describe('GET /metrics', () => {
  it('needs a key when auth is on, and labels requests by route template, never by raw path', async () => {
    harness = await fakeHarness({ apiKeys: [KEY] });
    expect((await harness.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
    await harness.app.inject({ method: 'POST', url: '/sandboxes', headers: auth, payload: { name: 'm1' } });
    await harness.app.inject({ method: 'GET', url: '/sandboxes/m1', headers: auth });
    await harness.app.inject({ method: 'GET', url: '/sandboxes/nope', headers: auth });
    await harness.app.inject({ method: 'GET', url: '/no/such/route', headers: auth });
    const res = await harness.app.inject({ method: 'GET', url: '/metrics', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.body;
    expect(text).toContain('sandboxd_http_requests_total{method="GET",route="/sandboxes/:name",status="200"} 1');
    expect(text).toContain('sandboxd_http_requests_total{method="GET",route="/sandboxes/:name",status="404"} 1');
    expect(text).toContain('sandboxd_http_requests_total{method="GET",route="unmatched",status="404"} 1');
    expect(text).toContain('sandboxd_http_requests_total{method="GET",route="/metrics",status="401"} 1');
    expect(text).not.toMatch(/route="\/sandboxes\/m1"|route="\/no\/such/);
    expect(text).toContain('sandboxd_sandbox_events_total{type="sandbox.created"} 1');
    expect(text).toContain('sandboxd_sandboxes_active 1');
    expect(text).toContain('sandboxd_warm_pool_size 0');
    expect(text).toMatch(/sandboxd_build_info\{version="[^"]+",node_version="v[^"]+",backend="fake"\} 1/);
  });

  it('keeps each app in a registry of its own', async () => {
    harness = await fakeHarness();
    const other = await fakeHarness();
    try {
      await other.app.inject({ method: 'GET', url: '/stats' });
      const text = (await harness.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(text).not.toContain('route="/stats"');
    } finally {
      await other.close();
    }
  });
});

describe('OpenAPI', () => {
  it('documents /events and /metrics with their content types, and the event schema', async () => {
    harness = await fakeHarness();
    const doc = (await harness.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths['/events'].get.responses['200'].content)).toEqual(['text/event-stream']);
    expect(Object.keys(doc.paths['/metrics'].get.responses['200'].content)).toEqual(['text/plain; version=0.0.4']);
    expect(doc.paths['/events'].get.parameters.map((p: { name: string }) => p.name).sort()).toEqual(['last-event-id', 'sandbox', 'type']);
    expect(doc.components.schemas.SandboxEvent.properties.type.enum).toContain('sandbox.exec.completed');
    expect(doc.webhooks.sandboxEvent.post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/SandboxEvent');
  });

  it('documents `event` beside `type` and the optional `resource` of an event, and the hint and details of an error', async () => {
    harness = await fakeHarness();
    const { schemas } = (await harness.app.inject({ method: 'GET', url: '/openapi.json' })).json().components;
    const event = schemas.SandboxEvent;
    expect(event.properties.event.enum).toEqual(event.properties.type.enum);
    expect(event.required).toEqual(expect.arrayContaining(['event', 'type', 'sandbox', 'sandbox_uuid']));
    expect(event.required).not.toContain('resource');
    expect(schemas.EventResource.required.sort()).toEqual(['id', 'kind', 'name']);
    expect(Object.keys(schemas.Error.properties)).toEqual(['success', 'error', 'code', 'problem', 'hint', 'details']);
    expect(schemas.Error.required).toEqual(['success', 'error', 'code']);
    const actions = schemas.NextStep.oneOf.map((step: { properties: { action: { const: string } } }) => step.properties.action.const);
    expect(actions.sort()).toEqual([
      'browser_open',
      'browser_snapshot',
      'create_volume',
      'delete_proxy_hook',
      'list_directory',
      'list_images',
      'mint_terminal_token',
      'recover',
      'register_class',
      'set_llm_key',
      'start',
      'store_execute',
      'store_ops',
    ]);
  });
});
