import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressCa } from '../../../../src/services/egress/egress-ca.js';
import type { SandboxEgress } from '../../../../src/services/egress/egress-proxy.js';
import { ProxyRepository } from '../../../../src/state/proxy-repository.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { EchoUpstream } from '../../../helpers/echo-upstream.js';
import { proxyAuth, resolverOf, viaProxy } from '../../../helpers/proxy-upstream.js';

/**
 * Secrets against upstreams that echo what they get (issue 25, items 14 and 15): the value
 * goes out, never back; secret hosts with a port; TLS interception toward the hosts of
 * secrets with `intercept_tls` only, against a local HTTPS upstream with its own CA.
 */
const NAMES: Record<string, string> = { 'secret.test': '127.0.0.1', 'plain.test': '127.0.0.1', 'tls.test': '127.0.0.1', 'untrusted.test': '127.0.0.1' };
const SECRET = 'real/secret"VALUE-7d2a9c41b';
const TLS_SECRET = 'tls-secret-VALUE-55aa01';
const rules = new Map<string, SandboxEgress>();
const ADMIN = { authorization: 'Bearer admin-key-000001' };
const USER = { authorization: 'Bearer user-key-0000001' };

let h: FakeHarness;
let echo: EchoUpstream;
let tlsEcho: EchoUpstream;
let proxy: string;
let token: string;
let placeholder: string;
let tlsPlaceholder: string;
let otherToken: string;

async function create(name: string, secrets: Record<string, unknown>): Promise<{ uuid: string; env: Record<string, string> }> {
  const res = await h.app.inject({ method: 'POST', url: '/sandboxes', headers: ADMIN, payload: { name, secrets } });
  expect(res.statusCode, res.body).toBe(201);
  const uuid = res.json().data.uuid as string;
  rules.set(uuid, { egress: 'open', allow: ['127.0.0.1'], deny: [] });
  return { uuid, env: (await h.services.sandboxes.require(name)).env };
}

beforeAll(async () => {
  echo = new EchoUpstream();
  await echo.start();
  tlsEcho = new EchoUpstream({ tls: { names: ['tls.test', 'plain.test', 'untrusted.test'], ips: ['127.0.0.1'] } });
  await tlsEcho.start();
  h = await fakeHarness({
    namedKeys: [
      { name: 'admin', key: 'admin-key-000001', admin: true, labels: {} },
      { name: 'user', key: 'user-key-0000001', admin: false, labels: {} },
    ],
    egress: {
      resolve: resolverOf(NAMES),
      upstreamCa: [tlsEcho.cert!],
      egressOf: (id) => rules.get(id),
      enabled: true,
      host: '127.0.0.1',
      port: 0,
    },
  });
  await h.services.egress.start();
  proxy = h.services.egress.url!;
  const made = await create('echoed', {
    API_TOKEN: { value: SECRET, host: `secret.test:${echo.port}` },
    TLS_TOKEN: { value: TLS_SECRET, host: `tls.test:${tlsEcho.port}`, intercept_tls: true },
  });
  token = h.services.egress.tokens.mint(made.uuid);
  placeholder = made.env.API_TOKEN!;
  tlsPlaceholder = made.env.TLS_TOKEN!;
  otherToken = h.services.egress.tokens.mint((await create('no-secret', {})).uuid);
});

afterAll(async () => {
  await h?.close();
  await echo?.close();
  await tlsEcho?.close();
});

/** An HTTPS request through a CONNECT tunnel of the proxy, trusting `ca` only; the peer's certificate too. */
function httpsVia(
  authority: string,
  path: string,
  options: { token: string; ca: string; headers?: Record<string, string> },
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string; issuer: string }> {
  const { hostname, port } = new URL(proxy);
  const servername = authority.replace(/:\d+$/, '');
  return new Promise((resolve, reject) => {
    const connect = httpRequest({ host: hostname, port, method: 'CONNECT', path: authority, headers: { 'proxy-authorization': proxyAuth(options.token) } });
    connect.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`));
      const tls = tlsConnect({ socket, servername, ca: options.ca, ALPNProtocols: ['http/1.1'] }, () => {
        const issuer = String((tls.getPeerCertificate() as PeerCertificate).issuer.CN);
        const req = httpRequest({ createConnection: () => tls, host: servername, path, headers: { host: authority, connection: 'close', ...options.headers } }, (answer) => {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => resolve({ status: answer.statusCode ?? 0, headers: answer.headers, text: Buffer.concat(chunks).toString(), issuer }));
        });
        req.on('error', reject);
        req.end();
      });
      tls.on('error', reject);
    });
    connect.on('error', reject);
    connect.end();
  });
}

describe('secrets never come back from an upstream that echoes them', () => {
  it('swaps the value going out and puts the placeholder back in echoed headers and a body split across chunks', async () => {
    const before = echo.received.length;
    const res = await viaProxy(proxy, `http://secret.test:${echo.port}/echo?q=1`, { token, headers: { authorization: `Bearer ${placeholder}`, 'x-api-key': placeholder } });
    expect(res.status).toBe(200);
    // The upstream got the value...
    expect(echo.received[before]!.headers.authorization).toBe(`Bearer ${SECRET}`);
    // ...the sandbox gets the placeholder, in the headers and in the JSON body (where the value is escaped).
    expect(res.headers['x-echo-authorization']).toBe(`Bearer ${placeholder}`);
    expect(res.headers['x-echo-key']).toBe(placeholder);
    expect(res.text).not.toContain('real/secret');
    expect(res.text).not.toContain(JSON.stringify(SECRET).slice(1, -1));
    expect(JSON.parse(res.text).headers.authorization).toBe(`Bearer ${placeholder}`);
    expect(res.headers['content-length']).toBeUndefined();
  });

  it('scrubs a gzip-compressed answer and echoed basic credentials', async () => {
    const basic = `Basic ${Buffer.from(`me:${placeholder}`).toString('base64')}`;
    const res = await viaProxy(proxy, `http://secret.test:${echo.port}/gzip`, { token, headers: { authorization: basic, 'accept-encoding': 'gzip' } });
    const text = res.headers['content-encoding'] === 'gzip' ? gunzipSync(Buffer.from(res.text, 'latin1')).toString() : res.text;
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(text).not.toContain('real/secret');
    expect(JSON.parse(text).headers.authorization).toBe(basic);
    expect(res.headers['x-echo-authorization']).toBe(basic);
    expect(Buffer.from(String(echo.received.at(-1)!.headers.authorization).slice(6), 'base64').toString()).toBe(`me:${SECRET}`);
  });

  it('a secret host with a port is swapped toward that port only; a bare host means port 80 for http://', async () => {
    const other = new EchoUpstream();
    await other.start();
    try {
      await viaProxy(proxy, `http://secret.test:${other.port}/other-port`, { token, headers: { authorization: `Bearer ${placeholder}` } });
      expect(other.received.at(-1)!.headers.authorization).toBe(`Bearer ${placeholder}`);
      const bare = await create('bare-host', { B: { value: 'bare-value-123', host: 'secret.test' } });
      await viaProxy(proxy, `http://secret.test:${other.port}/bare`, { token: h.services.egress.tokens.mint(bare.uuid), headers: { authorization: bare.env.B! } });
      expect(other.received.at(-1)!.headers.authorization).toBe(bare.env.B);
    } finally {
      await other.close();
    }
  });

  it.each([
    ['secret.test:0', 'port'],
    ['secret.test:70000', 'port'],
    ['secret.test:http', 'port'],
    ['bad host:443', 'secrets.A.host'],
  ])('refuses the secret host %s with a 400 naming the %s', async (host, words) => {
    const res = await h.app.inject({ method: 'POST', url: '/sandboxes', headers: ADMIN, payload: { name: 'bad-port', secrets: { A: { value: 'v', host } } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(words);
  });
});

describe('secrets over HTTPS: interception toward the secret host only', () => {
  it('terminates TLS with the server CA for an intercept_tls secret host: the upstream gets the value, the sandbox the placeholder', async () => {
    const ca = await h.services.egress.ca.certificatePem();
    const before = tlsEcho.received.length;
    const res = await httpsVia(`tls.test:${tlsEcho.port}`, '/api?x=1', { token, ca, headers: { authorization: `Bearer ${tlsPlaceholder}` } });
    expect(res.status).toBe(200);
    expect(res.issuer).toBe('sandboxd egress proxy CA');
    expect(tlsEcho.received[before]).toMatchObject({ url: '/api?x=1', headers: { authorization: `Bearer ${TLS_SECRET}`, host: `tls.test:${tlsEcho.port}` } });
    expect(res.text).not.toContain(TLS_SECRET);
    expect(res.headers['x-echo-authorization']).toBe(`Bearer ${tlsPlaceholder}`);
    expect(JSON.parse(res.text).headers.authorization).toBe(`Bearer ${tlsPlaceholder}`);
    // Each request inside the tunnel is decided and logged as one.
    const log = (await h.app.inject({ method: 'GET', url: '/proxy/log?sandbox=echoed&limit=3', headers: ADMIN })).json().data as { method: string; url: string }[];
    expect(log.find((entry) => entry.method === 'GET')).toMatchObject({ url: `https://tls.test:${tlsEcho.port}/api?x=1`, status: 200, decision: 'allow', port: tlsEcho.port });
  });

  it('tunnels every other host untouched: the client sees the upstream certificate', async () => {
    const res = await httpsVia(`plain.test:${tlsEcho.port}`, '/passthrough', { token, ca: tlsEcho.cert!, headers: { authorization: `Bearer ${tlsPlaceholder}` } });
    expect(res.issuer).toBe('echo upstream test CA');
    expect(tlsEcho.received.at(-1)!.headers.authorization).toBe(`Bearer ${tlsPlaceholder}`);
  });

  it('does not intercept the same host for a sandbox without that secret', async () => {
    const res = await httpsVia(`tls.test:${tlsEcho.port}`, '/no-secret', { token: otherToken, ca: tlsEcho.cert!, headers: { authorization: `Bearer ${tlsPlaceholder}` } });
    expect(res.issuer).toBe('echo upstream test CA');
    expect(tlsEcho.received.at(-1)!.headers.authorization).toBe(`Bearer ${tlsPlaceholder}`);
  });

  it('a secret without intercept_tls is not swapped over HTTPS (its tunnel is bytes)', async () => {
    const plainOnly = await create('http-only', { C: { value: 'http-only-value', host: `tls.test:${tlsEcho.port}` } });
    const res = await httpsVia(`tls.test:${tlsEcho.port}`, '/http-only', { token: h.services.egress.tokens.mint(plainOnly.uuid), ca: tlsEcho.cert!, headers: { authorization: plainOnly.env.C! } });
    expect(res.issuer).toBe('echo upstream test CA');
    expect(tlsEcho.received.at(-1)!.headers.authorization).toBe(plainOnly.env.C);
  });

  it('verifies the upstream: one whose certificate is not trusted for the name answers 502 and gets nothing', async () => {
    const ca = await h.services.egress.ca.certificatePem();
    const wrongName = await create('wrong-name', { D: { value: 'never-sent-value', host: `secret.test:${tlsEcho.port}`, intercept_tls: true } });
    const before = tlsEcho.received.length;
    const res = await httpsVia(`secret.test:${tlsEcho.port}`, '/x', { token: h.services.egress.tokens.mint(wrongName.uuid), ca, headers: { authorization: wrongName.env.D! } });
    expect(res.status).toBe(502);
    expect(res.text).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    expect(tlsEcho.received.length).toBe(before);
  });

  it('keeps one CA, its key sealed in the state store and in no API answer, to a non-admin or an admin', async () => {
    const ca = await h.services.egress.ca.certificatePem();
    const row = (await h.store.sql.first<{ cert: string; key: string }>('select cert, key from egress_ca'))!;
    expect(row.cert).toBe(ca);
    expect(row.key).toMatch(/^v1\./);
    expect(row.key).not.toContain('PRIVATE KEY');
    // Made once: another instance over the same store (a restart) uses the same CA.
    const again = new EgressCa({ repo: new ProxyRepository(h.store.sql), box: h.services.secrets, clock: () => new Date() });
    expect(await again.certificatePem()).toBe(ca);
    expect(await h.store.sql.first('select count(*) as n from egress_ca')).toEqual({ n: 1 });
    const stored = JSON.stringify(await h.store.sql.all('select * from sandbox_secrets'));
    expect(stored).not.toContain(TLS_SECRET);
    // No API answer carries the key or the values: to a non-admin key, nor to an admin one.
    const keyBody = h.services.secrets.open(row.key, 'egress-ca:key').split('\n')[1]!;
    for (const headers of [USER, ADMIN]) {
      for (const url of ['/sandboxes', '/sandboxes/echoed', '/sandboxes/echoed/logs', '/proxy/log?limit=1000', '/proxy/hooks', '/status', '/events?limit=1000', '/llm/keys', '/openapi.json']) {
        const res = await h.app.inject({ method: 'GET', url, headers });
        expect(res.body).not.toContain('PRIVATE KEY');
        expect(res.body).not.toContain(keyBody);
        expect(res.body).not.toContain(TLS_SECRET);
      }
    }
  });
});
