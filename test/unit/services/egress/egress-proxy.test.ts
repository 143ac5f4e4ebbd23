import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxEgress } from '../../../../src/services/egress/egress-proxy.js';
import type { SandboxEvent } from '../../../../src/services/events/event-bus.js';
import { createLogger } from '../../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { connectVia, ProxyUpstream, viaProxy } from '../../../helpers/proxy-upstream.js';

/**
 * The egress proxy on the proxy port (127.0.0.1) over the fake backend: tokens, destination
 * rules, hooks and secrets, against local upstreams. Names resolve through a test map (no DNS).
 */
const NAMES: Record<string, string> = {
  'allowed.test': '127.0.0.1',
  'second.test': '127.0.0.1',
  'other.test': '127.0.0.1',
  'x.blocked.test': '127.0.0.1',
  'metadata.test': '169.254.169.254',
};
const SECRET = 'real-secret-VALUE-8c1e4f';
const rules = new Map<string, SandboxEgress>();

let h: FakeHarness;
let upstream: ProxyUpstream;
let proxy: string;
let uuid: string;
let token: string;
let placeholder: string;
const events: SandboxEvent[] = [];
const logLines: string[] = [];
const url = (host: string, path = '/x') => `http://${host}:${upstream.port}${path}`;
const setRules = (r: Partial<SandboxEgress>) => rules.set(uuid, { egress: 'open', allow: ['127.0.0.1'], deny: [], ...r });

let hookServer: Server;
let hookUrl: string;
let hookAnswer: (body: Record<string, unknown>) => unknown = () => ({ action: 'allow' });
const hookBodies: Record<string, unknown>[] = [];

beforeAll(async () => {
  upstream = new ProxyUpstream();
  await upstream.start();
  hookServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      hookBodies.push(body);
      const answer = req.url === '/hang' ? undefined : hookAnswer(body);
      if (answer === undefined) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => hookServer.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
  const logger = createLogger('debug', { write: (line: string) => void logLines.push(line) });
  h = await fakeHarness(
    {
      egress: {
        enabled: true,
        port: 0,
        host: '127.0.0.1',
        resolve: async (name) => (NAMES[name] ? [{ address: NAMES[name]!, family: 4 }] : Promise.reject(Object.assign(new Error('no'), { code: 'ENOTFOUND' }))),
        egressOf: (id) => rules.get(id),
        proxyTimeoutMs: 300,
      },
    },
    undefined,
    { enabled: true, backlog: 1000, webhookUrls: [] },
    { logger },
  );
  h.services.observability.bus.subscribe(({ event }) => void events.push(event));
  await h.services.egress.start();
  proxy = h.services.egress.url!;
  const created = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'px', labels: { team: 'a' }, secrets: { API_TOKEN: { value: SECRET, host: `allowed.test:${upstream.port}` } } } });
  expect(created.statusCode, created.body).toBe(201);
  uuid = created.json().data.uuid;
  token = h.services.egress.tokens.mint(uuid);
  placeholder = (await h.services.sandboxes.require('px')).env.API_TOKEN!;
});

afterAll(async () => {
  await h?.close();
  await upstream?.close();
  hookServer?.closeAllConnections();
  hookServer?.close();
});

beforeEach(async () => {
  setRules({});
  hookAnswer = () => ({ action: 'allow' });
  for (const hook of await h.services.egress.hooks.list()) await h.services.egress.hooks.remove(hook.name);
});

describe('egress proxy: who may use it', () => {
  it('answers 407 with Proxy-Authenticate without a token, and for a forged one', async () => {
    const none = await viaProxy(proxy, url('allowed.test'));
    expect(none.status).toBe(407);
    expect(none.headers['proxy-authenticate']).toMatch(/^Basic realm=/);
    const forged = await viaProxy(proxy, url('allowed.test'), { token: `sbx-${uuid}-${'A'.repeat(43)}` });
    expect(forged.status).toBe(407);
    expect(forged.text).toContain('not a valid sandbox token');
    expect((await connectVia(proxy, `allowed.test:${upstream.port}`)).status).toBe(407);
    expect((await connectVia(proxy, `allowed.test:${upstream.port}`, 'sbx-nope')).status).toBe(407);
    expect(upstream.received.filter((r) => r.url === '/x')).toHaveLength(0);
  });
});

describe('egress proxy: destinations', () => {
  it('forwards an allowed request, streaming bodies, without hop-by-hop or proxy headers', async () => {
    const before = upstream.received.length;
    const body = Buffer.alloc(1024 * 1024, 'a');
    const answer = await viaProxy(proxy, url('allowed.test', '/upload?q=1'), { token, method: 'POST', body, headers: { connection: 'keep-alive, x-private', 'x-private': 'p', 'proxy-connection': 'keep-alive', 'x-kept': 'k' } });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(`hello from upstream ${body.length}`);
    expect(answer.headers['x-upstream']).toBe('yes');
    expect(answer.headers['x-hop']).toBeUndefined();
    const got = upstream.received[before]!;
    expect(got).toMatchObject({ method: 'POST', url: '/upload?q=1', bytes: body.length });
    expect(got.headers.host).toBe(`allowed.test:${upstream.port}`);
    expect(got.headers['x-kept']).toBe('k');
    expect(got.headers['proxy-authorization']).toBeUndefined();
    expect(got.headers['proxy-connection']).toBeUndefined();
    expect(got.headers['x-private']).toBeUndefined();
  });

  it('refuses loopback, link-local and literal IPs unless an allow IP/CIDR names them', async () => {
    setRules({ allow: [] });
    const named = await viaProxy(proxy, url('allowed.test'), { token });
    expect(named.status).toBe(403);
    expect(named.text).toContain('allowed.test resolves to 127.0.0.1');
    const literal = await viaProxy(proxy, url('127.0.0.1'), { token });
    expect(literal.status).toBe(403);
    expect(literal.text).toContain('literal IP address');
    expect((await viaProxy(proxy, 'http://169.254.169.254/latest/meta-data', { token })).status).toBe(403);
    expect((await viaProxy(proxy, url('metadata.test'), { token })).text).toContain('resolves to 169.254.169.254');
    expect((await viaProxy(proxy, 'http://[::1]:1/', { token })).status).toBe(403);
    expect((await connectVia(proxy, `127.0.0.1:${upstream.port}`, token)).status).toBe(403);
    setRules({ allow: ['127.0.0.0/8'] });
    expect((await viaProxy(proxy, url('127.0.0.1'), { token })).status).toBe(200);
  });

  it("with egress proxy, only the allow list's hosts pass; CONNECT is refused before any tunnel", async () => {
    setRules({ egress: 'proxy', allow: ['allowed.test', '127.0.0.1'] });
    expect((await viaProxy(proxy, url('allowed.test'), { token })).status).toBe(200);
    const other = await viaProxy(proxy, url('other.test'), { token });
    expect(other.status).toBe(403);
    expect(other.text).toContain("other.test is not in the sandbox's allow list");
    const refused = await connectVia(proxy, `other.test:${upstream.port}`, token);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('not in the sandbox');
    const tunnel = await connectVia(proxy, `allowed.test:${upstream.port}`, token);
    expect(tunnel.status).toBe(200);
    expect(tunnel.tunnelled).toContain('hello from upstream');
  });

  it('applies deny globs, egress none, and a change of the rules at once', async () => {
    setRules({ deny: ['*.blocked.test'] });
    expect((await viaProxy(proxy, url('x.blocked.test'), { token })).text).toContain('deny list');
    expect((await viaProxy(proxy, url('allowed.test'), { token })).status).toBe(200);
    setRules({ egress: 'none' });
    expect((await viaProxy(proxy, url('allowed.test'), { token })).text).toContain('egress is none');
  });

  it('answers 502 when the upstream cannot be reached or the name does not resolve', async () => {
    const closed = await viaProxy(proxy, 'http://allowed.test:1/', { token });
    expect(closed.status).toBe(502);
    expect(closed.text).toContain('ECONNREFUSED');
    expect((await viaProxy(proxy, 'http://nowhere.test/', { token })).status).toBe(502);
    expect((await connectVia(proxy, 'allowed.test:1', token)).status).toBe(502);
  });

  it('answers 504 when the upstream does not answer in time', async () => {
    const late = await viaProxy(proxy, url('allowed.test', '/hang'), { token });
    expect(late.status).toBe(504);
    expect(late.text).toContain('could not get an answer from');
  });

  it('keeps the client connection alive across requests', async () => {
    const { Agent, request } = await import('node:http');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const { hostname, port } = new URL(proxy);
    const once = () =>
      new Promise<boolean>((resolve, reject) => {
        const req = request({ host: hostname, port, path: url('allowed.test'), agent, headers: { 'proxy-authorization': `Basic ${Buffer.from(`sbx:${token}`).toString('base64')}` } }, (res) => {
          res.resume();
          res.on('end', () => resolve(req.reusedSocket));
        });
        req.on('error', reject);
        req.end();
      });
    expect(await once()).toBe(false);
    expect(await once()).toBe(true);
    agent.destroy();
  });

  it("serves an absolute URL of the proxy port itself as its own path (the LLM gateway through HTTP_PROXY)", async () => {
    const answer = await viaProxy(proxy, `${proxy}/llm/openai/v1/models`, { token });
    expect(answer.status).toBe(401);
    expect(answer.text).toContain('sandboxd LLM gateway');
  });

  it('answers 400 for an https:// absolute URL (that is what CONNECT is for)', async () => {
    expect((await viaProxy(proxy, 'https://allowed.test/', { token })).status).toBe(400);
  });
});

describe('egress proxy: hooks', () => {
  const post = (payload: object) => h.app.inject({ method: 'POST', url: '/proxy/hooks', payload });

  it('creates, lists, refuses duplicates and deletes by path and by ?name=', async () => {
    const created = await post({ name: 'no-other', event: 'on_request', match: { host: 'other.test' }, target: { type: 'block', status: 451 } });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().data).toMatchObject({ name: 'no-other', event: 'on_request', match: { host: 'other.test' }, target: { type: 'block', status: 451 } });
    expect((await post({ name: 'no-other', event: 'on_request', target: { type: 'audit' } })).statusCode).toBe(409);
    expect((await post({ name: 'second', event: 'on_response', target: { type: 'audit' } })).statusCode).toBe(201);
    const listed = await h.app.inject({ method: 'GET', url: '/proxy/hooks' });
    expect(listed.json().data.map((x: { name: string }) => x.name)).toEqual(['no-other', 'second']);
    expect((await h.app.inject({ method: 'DELETE', url: '/proxy/hooks/no-other' })).json().data).toBe("proxy hook 'no-other' deleted");
    expect((await h.app.inject({ method: 'DELETE', url: '/proxy/hooks?name=second' })).statusCode).toBe(200);
    const missing = await h.app.inject({ method: 'DELETE', url: '/proxy/hooks/no-other' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toContain("proxy hook 'no-other' not found");
    expect(events.some((e) => e.type === 'proxy.hook.created')).toBe(true);
    expect(events.some((e) => e.type === 'proxy.hook.deleted')).toBe(true);
  });

  it.each([
    [{ name: 'a', event: 'on_connect', target: { type: 'audit' } }, 'event'],
    [{ name: 'a', event: 'on_request', match: { host: 'bad host!' }, target: { type: 'audit' } }, 'match.host'],
    [{ name: 'a', event: 'on_request', target: { type: 'webhook', url: 'ftp://x', fail: 'open' } }, 'target.url'],
    [{ name: 'a', event: 'on_request', target: { type: 'webhook', url: 'http://x' } }, 'target.fail'],
    [{ name: 'a', event: 'on_request', target: { type: 'mystery' } }, 'target'],
    [{ name: 'a', event: 'on_response', target: { type: 'block' } }, 'target.type'],
    [{ name: 'Bad Name', event: 'on_request', target: { type: 'audit' } }, 'name'],
  ])('refuses %j with a 400 naming %s', async (payload, field) => {
    const res = await post(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(field);
  });

  it('blocks per hook, in creation order, and only matching requests', async () => {
    await post({ name: 'block-other', event: 'on_request', match: { host: 'other.test', sandbox: 'p*', labels: { team: 'a' } }, target: { type: 'block', status: 451 } });
    const blocked = await viaProxy(proxy, url('other.test'), { token });
    expect(blocked.status).toBe(451);
    expect(blocked.text).toContain("blocked by proxy hook 'block-other'");
    expect((await connectVia(proxy, `other.test:${upstream.port}`, token)).status).toBe(451);
    expect((await viaProxy(proxy, url('allowed.test'), { token })).status).toBe(200);
  });

  it('asks a webhook (redacted headers, never the token) and follows its allow or deny', async () => {
    await post({ name: 'ask', event: 'on_request', match: { path_prefix: '/ask' }, target: { type: 'webhook', url: `${hookUrl}/decide`, fail: 'closed' } });
    hookAnswer = (body) => (String(body.path).includes('deny') ? { action: 'deny', reason: 'not today' } : { action: 'allow' });
    hookBodies.length = 0;
    expect((await viaProxy(proxy, url('allowed.test', '/ask/ok'), { token, headers: { authorization: 'Bearer secret-ish', cookie: 'c=1' } })).status).toBe(200);
    const denied = await viaProxy(proxy, url('allowed.test', '/ask/deny'), { token });
    expect(denied.status).toBe(403);
    expect(denied.text).toContain("denied by proxy hook 'ask': not today");
    expect(hookBodies[0]).toMatchObject({ sandbox: 'px', sandbox_uuid: uuid, method: 'GET', host: 'allowed.test', port: upstream.port, path: '/ask/ok' });
    expect((hookBodies[0]!.headers as Record<string, string>).authorization).toBe('[redacted]');
    expect((hookBodies[0]!.headers as Record<string, string>).cookie).toBe('[redacted]');
    expect(JSON.stringify(hookBodies)).not.toContain(token);
    // Not matched (no path under /ask): the webhook is not asked.
    const asked = hookBodies.length;
    expect((await viaProxy(proxy, url('allowed.test', '/other'), { token })).status).toBe(200);
    expect(hookBodies.length).toBe(asked);
  });

  it('applies fail when the webhook hangs: closed denies, open allows, each after timeout_ms', async () => {
    await post({ name: 'hang-closed', event: 'on_request', match: { host: 'other.test' }, target: { type: 'webhook', url: `${hookUrl}/hang`, timeout_ms: 200, fail: 'closed' } });
    await post({ name: 'hang-open', event: 'on_request', match: { host: 'allowed.test' }, target: { type: 'webhook', url: `${hookUrl}/hang`, timeout_ms: 200, fail: 'open' } });
    let started = Date.now();
    const closed = await viaProxy(proxy, url('other.test'), { token });
    expect(closed.status).toBe(403);
    expect(closed.text).toContain("proxy hook 'hang-closed' failed (no answer within 200 ms) and fails closed");
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    started = Date.now();
    expect((await viaProxy(proxy, url('allowed.test'), { token })).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('audit hooks publish proxy.audited; on_response webhooks are told the outcome', async () => {
    await post({ name: 'watch', event: 'on_request', target: { type: 'audit' } });
    await post({ name: 'after', event: 'on_response', match: { host: 'allowed.test' }, target: { type: 'webhook', url: `${hookUrl}/after`, fail: 'open' } });
    hookBodies.length = 0;
    expect((await viaProxy(proxy, url('allowed.test', '/told'), { token })).status).toBe(200);
    await expect.poll(() => hookBodies.length).toBe(1);
    expect(hookBodies[0]).toMatchObject({ path: '/told', status: 200, decision: 'allow', bytes_out: 0 });
    expect(hookBodies[0]!.bytes_in).toBeGreaterThan(0);
    const audited = events.filter((e) => e.type === 'proxy.audited').at(-1)!;
    expect(audited).toMatchObject({ sandbox: 'px', metadata: { hook: 'watch', host: 'allowed.test', method: 'GET' } });
  });

  it('hooks are read from the state store: a new service over the same store applies them', async () => {
    await post({ name: 'kept', event: 'on_request', match: { host: 'other.test' }, target: { type: 'block' } });
    const { ProxyHooks } = await import('../../../../src/services/egress/proxy-hooks.js');
    const { ProxyRepository } = await import('../../../../src/state/proxy-repository.js');
    const again = new ProxyHooks({ repo: new ProxyRepository(h.store.sql), audit: h.services.audit, clock: () => new Date(), logger: h.services.egress['input'].logger, audited: () => undefined });
    expect((await again.list()).map((x) => x.name)).toEqual(['kept']);
    const facts = { timestamp: '', sandbox: 'px', sandbox_uuid: uuid, labels: {}, method: 'GET', url: '', host: 'other.test', port: 80, path: '/', headers: {} };
    expect(await again.onRequest(facts)).toMatchObject({ decision: 'deny', status: 403, hook: 'kept' });
  });
});

describe('egress proxy: log and events', () => {
  it('GET /proxy/log lists recent decisions, newest first, per sandbox; denials publish proxy.denied', async () => {
    setRules({ egress: 'proxy', allow: ['127.0.0.1'] });
    await viaProxy(proxy, url('other.test', '/logged'), { token });
    const log = await h.app.inject({ method: 'GET', url: '/proxy/log?sandbox=px&limit=1' });
    expect(log.statusCode).toBe(200);
    expect(log.json().data).toEqual([
      expect.objectContaining({ sandbox: 'px', sandbox_uuid: uuid, method: 'GET', host: 'other.test', decision: 'deny', status: 403, url: `http://other.test:${upstream.port}/logged` }),
    ]);
    expect((await h.app.inject({ method: 'GET', url: '/proxy/log?sandbox=nobody' })).json().data).toEqual([]);
    expect((await h.app.inject({ method: 'GET', url: '/proxy/log?limit=0' })).statusCode).toBe(400);
    expect(events.some((e) => e.type === 'proxy.denied' && e.metadata.host === 'other.test')).toBe(true);
    const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/sandboxd_proxy_requests_total\{decision="deny"\} \d+/);
    expect(metrics.body).toMatch(/sandboxd_proxy_requests_total\{decision="allow"\} \d+/);
  });
});

describe('sandbox secrets', () => {
  it('the sandbox gets a placeholder; responses show secret_mappings, never the value', async () => {
    expect(placeholder).toMatch(/^sbx-secret-[A-Za-z0-9_-]{24}$/);
    const got = await h.app.inject({ method: 'GET', url: '/sandboxes/px' });
    expect(got.json().data.secret_mappings).toEqual({ API_TOKEN: `allowed.test:${upstream.port}` });
    expect(got.body).not.toContain(SECRET);
  });

  it('swaps the placeholder in headers and basic auth toward its host only', async () => {
    setRules({ allow: ['127.0.0.1'] });
    const before = upstream.received.length;
    await viaProxy(proxy, url('allowed.test', '/with-secret'), { token, headers: { authorization: `Bearer ${placeholder}`, 'x-api-key': placeholder } });
    await viaProxy(proxy, url('second.test', '/with-secret'), { token, headers: { authorization: `Bearer ${placeholder}` } });
    await viaProxy(proxy, `http://user:${placeholder}@allowed.test:${upstream.port}/userinfo`, { token });
    await viaProxy(proxy, url('allowed.test', '/basic'), { token, headers: { authorization: `Basic ${Buffer.from(`me:${placeholder}`).toString('base64')}` } });
    const [toHost, toOther, userinfo, basic] = upstream.received.slice(before);
    expect(toHost!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(toHost!.headers['x-api-key']).toBe(SECRET);
    expect(toOther!.headers.authorization).toBe(`Bearer ${placeholder}`);
    expect(Buffer.from(String(userinfo!.headers.authorization).slice(6), 'base64').toString()).toBe(`user:${SECRET}`);
    expect(Buffer.from(String(basic!.headers.authorization).slice(6), 'base64').toString()).toBe(`me:${SECRET}`);
  });

  it('never shows the value in any API response, event or log line', async () => {
    const bodies = await Promise.all(['/sandboxes', '/sandboxes/px', '/proxy/log', '/proxy/hooks', '/sandboxes/px/logs'].map((u) => h.app.inject({ method: 'GET', url: u })));
    for (const res of bodies) expect(res.body).not.toContain(SECRET);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    expect(logLines.join('\n')).not.toContain(SECRET);
    const stored = await h.store.sql.all('select * from sandbox_secrets');
    expect(JSON.stringify(stored)).not.toContain(SECRET);
  });

  it.each([
    [{ A: { value: 'v' } }, 'secrets.A.host'],
    [{ A: { value: 'v', host: 'bad host' } }, 'secrets.A.host'],
    [{ 'bad-name': { value: 'v', host: 'x.test' } }, 'secrets'],
    [{ A: { value: '', host: 'x.test' } }, 'secrets.A.value'],
  ])('refuses secrets %j with a 400 naming %s', async (secrets, field) => {
    const res = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'bad-secrets', secrets } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(field);
  });

  it('refuses a name both in env and in secrets', async () => {
    const res = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'both', env: { A: '1' }, secrets: { A: { value: 'v', host: 'x.test' } } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain('either in env or in secrets');
  });

  it('forgets the secrets with the sandbox', async () => {
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'gone', secrets: { B: { value: 'bye', host: 'x.test' } } } });
    const gone = await h.services.sandboxes.require('gone');
    expect(await h.store.sql.first('select count(*) as n from sandbox_secrets where sandbox_uuid = ?', [gone.uuid])).toEqual({ n: 1 });
    await h.app.inject({ method: 'DELETE', url: '/sandboxes/gone' });
    expect(await h.store.sql.first('select count(*) as n from sandbox_secrets where sandbox_uuid = ?', [gone.uuid])).toEqual({ n: 0 });
  });
});
