import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxEgress } from '../../src/services/egress/egress-proxy.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { ProxyUpstream } from '../helpers/proxy-upstream.js';

/**
 * The egress proxy from inside a real Docker sandbox: curl in the sandbox goes through the
 * proxy on the bridge gateway to LOCAL upstreams on the host's loopback (no internet here).
 * Names resolve through a test map to 127.0.0.1, which every rule set allows by CIDR (loopback
 * is refused unless an allow entry names it). The sandbox's proxy env is set by the test with
 * the sandbox token (the `net` branch sets it for every exec).
 */
const SECRET = `real-secret-${Math.random().toString(36).slice(2)}-VALUE`;
const NAMES: Record<string, string> = { 'allowed.test': '127.0.0.1', 'other.test': '127.0.0.1', 'second.test': '127.0.0.1' };
const rules = new Map<string, SandboxEgress>();
const name = uniqueName('proxy');

let rt: DockerRuntime;
let upstream: ProxyUpstream;
let hookServer: Server;
let hookUrl: string;
let uuid: string;
let gateway: string;
let port: number;
let proxyEnv: Record<string, string>;
let placeholder: string;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

/** Runs a shell command in the sandbox; `env` under the proxy variables. */
async function sh(script: string, env: Record<string, string> = proxyEnv): Promise<{ stdout: string; exit: number }> {
  const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', script], env });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { stdout: res.body.data.stdout as string, exit: res.body.data.exit_code as number };
}

/** curl's status code (and, with -p, the CONNECT status) for a URL from the sandbox. */
async function curl(args: string): Promise<string> {
  return (await sh(`curl -s -o /dev/null --max-time 20 -w '%{http_code} %{http_connect}' ${args}`)).stdout.trim();
}

beforeAll(async () => {
  upstream = new ProxyUpstream();
  await upstream.start();
  hookServer = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ action: 'deny', reason: 'the webhook says no' }));
    });
  });
  await new Promise<void>((resolve) => hookServer.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
  rt = await dockerRuntime({ proxy: true, proxyPort: 0 }, undefined, undefined, {
    resolve: async (host) => (NAMES[host] ? [{ address: NAMES[host]!, family: 4 }] : Promise.reject(Object.assign(new Error('no'), { code: 'ENOTFOUND' }))),
    egressOf: (id) => rules.get(id),
  });
  const created = await api('POST', '/sandboxes', { name, image: 'sandboxd/python:bookworm', secrets: { API_TOKEN: { value: SECRET, host: `allowed.test:${upstream.port}` } } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  expect(JSON.stringify(created.body)).not.toContain(SECRET);
  expect(created.body.data.secret_mappings).toEqual({ API_TOKEN: `allowed.test:${upstream.port}` });
  uuid = created.body.data.uuid;
  const url = new URL(rt.services.egress.url!);
  gateway = url.hostname;
  port = Number(url.port);
  // The server gives the sandbox's commands HTTP_PROXY and friends (with its token) by itself.
  proxyEnv = {};
  placeholder = (await sh('printf %s "$API_TOKEN"')).stdout;
}, 120_000);

afterAll(async () => {
  await rt?.dispose();
  await upstream?.close();
  hookServer?.closeAllConnections();
  hookServer?.close();
});

beforeEach(async () => {
  rules.set(uuid, { egress: 'proxy', allow: ['allowed.test', 'second.test', '127.0.0.1'], deny: [] });
  for (const hook of (await api('GET', '/proxy/hooks')).body.data as { name: string }[]) await api('DELETE', `/proxy/hooks/${hook.name}`);
});

describe('egress proxy from a Docker sandbox', () => {
  it('the proxy variables reach an allowed host; a host outside the allow list is 403', async () => {
    expect(await curl(`http://allowed.test:${upstream.port}/a`)).toBe('200 000');
    expect(upstream.received.at(-1)).toMatchObject({ url: '/a' });
    expect(await curl(`http://other.test:${upstream.port}/b`)).toBe('403 000');
    const log = await api('GET', `/proxy/log?sandbox=${name}&limit=1`);
    expect(log.body.data[0]).toMatchObject({ host: 'other.test', decision: 'deny', status: 403 });
  });

  it('answers 407 without a token and for a forged one', async () => {
    expect(await curl(`-x http://${gateway}:${port} http://allowed.test:${upstream.port}/`)).toBe('407 000');
    const forged = `sbx-${uuid}-${'x'.repeat(43)}`;
    expect(await curl(`-x http://sbx:${forged}@${gateway}:${port} http://allowed.test:${upstream.port}/`)).toBe('407 000');
  });

  it('refuses a CONNECT to a host outside the allow list before any tunnel, and opens one to an allowed host', async () => {
    expect(await curl(`-p http://other.test:${upstream.port}/`)).toMatch(/^000 403$/);
    expect(await curl(`-p http://allowed.test:${upstream.port}/tunnelled`)).toBe('200 200');
  });

  it('refuses a literal IP no allow entry names', async () => {
    expect(await curl('http://10.255.255.1:8080/')).toBe('403 000');
    rules.set(uuid, { egress: 'open', allow: [], deny: [] });
    // NO_PROXY names 127.0.0.1 (the sandbox's own loopback): asked through the proxy explicitly.
    expect(await curl(`--noproxy '' http://127.0.0.1:${upstream.port}/`)).toBe('403 000');
    expect(await curl('http://169.254.169.254/latest/meta-data/')).toBe('403 000');
  });

  it('blocks per hook and per webhook answer', async () => {
    expect((await api('POST', '/proxy/hooks', { name: 'no-admin', event: 'on_request', match: { path_prefix: '/admin' }, target: { type: 'block' } })).status).toBe(201);
    expect((await api('POST', '/proxy/hooks', { name: 'ask', event: 'on_request', match: { host: 'second.test' }, target: { type: 'webhook', url: hookUrl, fail: 'open' } })).status).toBe(201);
    expect(await curl(`http://allowed.test:${upstream.port}/admin/x`)).toBe('403 000');
    expect(await curl(`http://allowed.test:${upstream.port}/public`)).toBe('200 000');
    expect(await curl(`http://second.test:${upstream.port}/x`)).toBe('403 000');
    const denied = await sh(`curl -s --max-time 20 http://second.test:${upstream.port}/x`);
    expect(denied.stdout).toContain("denied by proxy hook 'ask': the webhook says no");
  });

  it('swaps the secret toward its host only; the value is nowhere in the sandbox', async () => {
    expect(placeholder).toMatch(/^sbx-secret-/);
    const before = upstream.received.length;
    await sh(`curl -s -o /dev/null -H "Authorization: Bearer $API_TOKEN" http://allowed.test:${upstream.port}/s1`);
    await sh(`curl -s -o /dev/null -H "Authorization: Bearer $API_TOKEN" http://second.test:${upstream.port}/s2`);
    await sh(`curl -s -o /dev/null -u "me:$API_TOKEN" http://allowed.test:${upstream.port}/s3`);
    const [toHost, toOther, basic] = upstream.received.slice(before);
    expect(toHost!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(toOther!.headers.authorization).toBe(`Bearer ${placeholder}`);
    expect(Buffer.from(String(basic!.headers.authorization).slice(6), 'base64').toString()).toBe(`me:${SECRET}`);
    // The sandbox: its env, its files, every process's environment.
    const dump = await sh(`env; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo done`, {});
    expect(dump.stdout).toContain(`API_TOKEN=${placeholder}`);
    expect(dump.stdout).toContain('done');
    expect(dump.stdout).not.toContain(SECRET);
    // The files: the value is given to grep on stdin (never in a command line, an env or a file).
    const files = await api('POST', `/sandboxes/${name}/exec`, {
      command: ['sh', '-c', 'grep -rslF -f - /etc /root /home /tmp /workspace /var /opt /usr/local 2>/dev/null; echo "exit $?"'],
      stdin: `${SECRET}\n`,
    });
    // No file listed: grep found nothing (1), or nothing in what it could read (2: some paths are root's).
    expect(files.body.data.stdout).toMatch(/^exit [12]\n$/);
    const inspect = await rt.backend.inspect((await rt.services.sandboxes.require(name)).backend_id!);
    expect(JSON.stringify(inspect)).not.toContain(SECRET);
    // Every response about it.
    for (const path of ['/sandboxes', `/sandboxes/${name}`, `/sandboxes/${name}/logs`, '/proxy/log?limit=1000', '/proxy/hooks']) {
      expect(JSON.stringify((await api('GET', path)).body)).not.toContain(SECRET);
    }
  });
});
