import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxEgress } from '../../src/services/egress/egress-proxy.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { resolverOf } from '../helpers/proxy-upstream.js';

/**
 * Secrets toward HTTPS from inside real Docker sandboxes (issue 25, item 15): a local HTTPS
 * upstream with a CA of its own (trusted by the proxy through `upstreamCa`, never by the
 * sandbox) echoes what it gets. Names resolve through a test map to 127.0.0.1, where the
 * proxy (on the host) reaches it; the sandboxes reach nothing but the proxy.
 */
const SECRET = `https-secret-${Math.random().toString(36).slice(2)}-VALUE`;
const NAMES: Record<string, string> = { 'api.secret.test': '127.0.0.1', 'plain.secret.test': '127.0.0.1' };
const rules = new Map<string, SandboxEgress>();
const withSecret = uniqueName('tls');
const withoutSecret = uniqueName('tls-none');

let rt: DockerRuntime;
let upstream: EchoUpstream;
let authority: string;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

/** Runs a shell command in a sandbox (with the server's env: the proxy and, where it has secrets, the CA variables). */
async function sh(sandbox: string, script: string, stdin?: string): Promise<{ stdout: string; stderr: string; exit: number }> {
  const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['sh', '-c', script], ...(stdin !== undefined ? { stdin } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { stdout: res.body.data.stdout as string, stderr: res.body.data.stderr as string, exit: res.body.data.exit_code as number };
}

beforeAll(async () => {
  upstream = new EchoUpstream({ tls: { names: Object.keys(NAMES), ips: [] } });
  await upstream.start();
  authority = `api.secret.test:${upstream.port}`;
  rt = await dockerRuntime({ proxy: true, proxyPort: 0, allowSudoExec: true }, undefined, undefined, {
    resolve: resolverOf(NAMES),
    egressOf: (id) => rules.get(id),
    upstreamCa: [upstream.cert!],
  });
  for (const [name, secrets] of [
    [withSecret, { API_TOKEN: { value: SECRET, host: authority, intercept_tls: true } }],
    [withoutSecret, undefined],
  ] as const) {
    const created = await api('POST', '/sandboxes', { name, image: 'sandboxd/node:bookworm', ...(secrets ? { secrets } : {}) });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    rules.set(created.body.data.uuid, { egress: 'proxy', allow: [...Object.keys(NAMES), '127.0.0.1'], deny: [] });
  }
}, 180_000);

afterAll(async () => {
  await rt?.dispose();
  await upstream?.close();
});

describe('secrets over HTTPS from a Docker sandbox', () => {
  it('curl, python and node reach the secret host with the CA trusted: the upstream gets the value, the sandbox reads only the placeholder', async () => {
    const placeholder = (await sh(withSecret, 'printf %s "$API_TOKEN"')).stdout;
    expect(placeholder).toMatch(/^sbx-secret-/);
    const before = upstream.received.length;
    // No -k, no --cacert: the system store and SSL_CERT_FILE trust the proxy's CA.
    const viaCurl = await sh(withSecret, `curl -sS --fail --max-time 30 -H "Authorization: Bearer $API_TOKEN" https://${authority}/v1/echo?via=curl`);
    expect(viaCurl.exit, viaCurl.stderr).toBe(0);
    const python = [
      'import json, os, urllib.request',
      `req = urllib.request.Request("https://${authority}/v1/echo?via=python", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})`,
      'print(urllib.request.urlopen(req, timeout=30).read().decode())',
    ].join('\n');
    const viaPython = await sh(withSecret, `python3 -c '${python}'`);
    expect(viaPython.exit, viaPython.stderr).toBe(0);
    // Node through the proxy by hand (its https module reads no proxy variables): NODE_EXTRA_CA_CERTS trusts the CA.
    const node = [
      "const http = require('http'), tls = require('tls');",
      'const proxy = new URL(process.env.HTTPS_PROXY);',
      "const auth = 'Basic ' + Buffer.from('sbx:' + decodeURIComponent(proxy.password)).toString('base64');",
      `http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: '${authority}', headers: { 'proxy-authorization': auth } }).on('connect', (res, socket) => {`,
      "  const s = tls.connect({ socket, servername: 'api.secret.test' }, () => {",
      `    s.write('GET /v1/echo?via=node HTTP/1.1\\r\\nHost: ${authority}\\r\\nAuthorization: Bearer ' + process.env.API_TOKEN + '\\r\\nConnection: close\\r\\n\\r\\n');`,
      '  });',
      "  let out = ''; s.on('data', (d) => (out += d)); s.on('end', () => process.stdout.write(out));",
      "  s.on('error', (e) => { console.error(e.message); process.exit(3); });",
      '}).end();',
    ].join('\n');
    const viaNode = await sh(withSecret, 'node -', node);
    expect(viaNode.exit, viaNode.stderr).toBe(0);
    // The raw answer: the echoed header, and the body in the upstream's small chunks, streamed as they came.
    expect(viaNode.stdout).toContain(`x-echo-authorization: Bearer ${placeholder}`);
    expect(viaNode.stdout).not.toContain(SECRET);
    const [fromCurl, fromPython, fromNode] = upstream.received.slice(before);
    expect(fromCurl).toMatchObject({ url: '/v1/echo?via=curl', headers: { authorization: `Bearer ${SECRET}` } });
    expect(fromPython).toMatchObject({ url: '/v1/echo?via=python', headers: { authorization: `Bearer ${SECRET}` } });
    expect(fromNode).toMatchObject({ url: '/v1/echo?via=node', headers: { authorization: `Bearer ${SECRET}` } });
    for (const answer of [viaCurl.stdout, viaPython.stdout]) {
      expect(answer).not.toContain(SECRET);
      expect(JSON.parse(answer).headers.authorization).toBe(`Bearer ${placeholder}`);
    }
    // Headers too: the echoed Authorization comes back with the placeholder.
    const head = await sh(withSecret, `curl -sS -D - -o /dev/null --max-time 30 -H "Authorization: Bearer $API_TOKEN" https://${authority}/h`);
    expect(head.stdout).toContain(`x-echo-authorization: Bearer ${placeholder}`);
    expect(head.stdout).not.toContain(SECRET);
    // The certificate the sandbox saw is the proxy CA's.
    const verbose = await sh(withSecret, `curl -sS -v -o /dev/null --max-time 30 https://${authority}/cert 2>&1`);
    expect(verbose.stdout).toContain('issuer: CN=sandboxd egress proxy CA');
  });

  it('tunnels a host that is no secret host: the sandbox sees the upstream certificate, which it does not trust', async () => {
    const verbose = await sh(withSecret, `curl -sS -k -v -o /dev/null --max-time 30 https://plain.secret.test:${upstream.port}/ 2>&1`);
    expect(verbose.stdout).toContain('issuer: CN=echo upstream test CA');
    expect(verbose.stdout).not.toContain('sandboxd egress proxy CA');
    const strict = await sh(withSecret, `curl -sS -o /dev/null --max-time 30 https://plain.secret.test:${upstream.port}/`);
    expect(strict.exit).toBe(60);
  });

  it('does not intercept the secret host for a sandbox without that secret (nor make it trust the CA)', async () => {
    const verbose = await sh(withoutSecret, `curl -sS -k -v -o /dev/null --max-time 30 -H "Authorization: Bearer stolen" https://${authority}/x 2>&1`);
    expect(verbose.stdout).toContain('issuer: CN=echo upstream test CA');
    expect(upstream.received.at(-1)!.headers.authorization).toBe('Bearer stolen');
    expect((await sh(withoutSecret, 'env')).stdout).not.toMatch(/SSL_CERT_FILE|NODE_EXTRA_CA_CERTS|REQUESTS_CA_BUNDLE/);
  });

  it("the sandbox holds the CA's certificate and the CA variables, never its key, nor the value", async () => {
    const env = (await sh(withSecret, 'env')).stdout;
    expect(env).toContain('SSL_CERT_FILE=/etc/sandboxd/ca-bundle.pem');
    expect(env).toContain('REQUESTS_CA_BUNDLE=/etc/sandboxd/ca-bundle.pem');
    expect(env).toContain('NODE_EXTRA_CA_CERTS=/etc/sandboxd/egress-ca.pem');
    const ca = await rt.services.egress.ca.certificatePem();
    expect((await sh(withSecret, 'cat /etc/sandboxd/egress-ca.pem')).stdout.trim()).toBe(ca.trim());
    const db = new Sqlite(join(rt.dataDir, 'sandboxd.db'), { readonly: true });
    const row = db.prepare('select key from egress_ca').get() as { key: string };
    db.close();
    const keyLines = rt.services.secrets.open(row.key, 'egress-ca:key').split('\n').filter((line) => line && !line.startsWith('-----'));
    expect(keyLines.length).toBeGreaterThan(1);
    // Every line of the key and the value, searched as root through the whole filesystem (but
    // /proc, /sys, /dev) and every process's environment: grep lists no file and finds no line.
    const patterns = `${[...keyLines, SECRET].join('\n')}\n`;
    const asRoot = async (script: string, stdin = patterns) => {
      const res = await api('POST', `/sandboxes/${withSecret}/exec`, { command: ['sh', '-c', script], sudo: true, stdin, timeout_ms: 300_000 });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data.stdout as string;
    };
    // No file listed: grep found nothing (1), or nothing in what it could read (2: dangling links and the like).
    expect(await asRoot('grep -rlsF -f - / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; echo "exit $?"')).toMatch(/^exit [12]\n$/);
    expect(await asRoot('grep -alsF -f - /proc/[0-9]*/environ; echo "exit $?"')).toMatch(/^exit [12]\n$/);
    // The same search finds what is there: a line of the CA's certificate, in the files written for it.
    const certLine = ca.split('\n')[3]!;
    const found = await asRoot('grep -rlsF -f - / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; echo "exit $?"', `${certLine}\n`);
    expect(found).toContain('/etc/sandboxd/egress-ca.pem\n');
    expect(found).toContain('/etc/ssl/certs/ca-certificates.crt\n');
    expect(found).toContain('/usr/local/share/ca-certificates/sandboxd-egress-ca.crt\n');
  });
});
