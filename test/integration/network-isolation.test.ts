import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerName } from '../../src/backends/docker/container-spec.js';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { engineResolvers } from '../../src/backends/docker/docker-networks.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { TCP_PROBE } from '../helpers/tcp-probe.js';

/**
 * Network isolation and enforced egress on real Docker (README, 'Security model'): sandboxd's own
 * networks (inter-container traffic off, an internal one for `proxy`) and its packet-filter
 * chains. Everything here is named from a network name of this file's own, removed at the end.
 * Refused connections are dropped, so each probe waits out a short timeout.
 */
const NETWORK = `nt${Math.random().toString(36).slice(2, 8)}`;
const PYTHON = 'sandboxd/python:bookworm';
let rt: DockerRuntime;
let host: Server;
let hostPort: number;
let openGateway: string;
let proxyGateway: string;
/** An address of the host that is not one of Docker's bridges (eth0's). */
let hostAddress: string;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

/** Prints one line per target: `open <first bytes>` or `closed <error>`; the proxy variables are dropped. */
async function probe(sandbox: string, targets: string[]): Promise<Record<string, string>> {
  const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['python3', '-c', TCP_PROBE, JSON.stringify(targets)], timeout_ms: 60_000 });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.exit_code, res.body.data.stderr).toBe(0);
  return JSON.parse(res.body.data.stdout) as Record<string, string>;
}

async function create(name: string, extra: Record<string, unknown> = {}): Promise<any> {
  const res = await api('POST', '/sandboxes', { name, image: PYTHON, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

/**
 * A TEST-ONLY forwarder (the real egress proxy is another part's): plain-HTTP absolute-form
 * requests, the sandbox named by its token, let through to hosts its `network.allow` names.
 */
/** Fetches a URL with the env the server gave the sandbox (its proxy variables): `<status> <body>`. */
const FETCH = `
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r: print(r.status, r.read().decode())
except urllib.error.HTTPError as e: print(e.code, e.read().decode())
except Exception as e: print('failed', type(e).__name__)
`;

async function fetchVia(sandbox: string, url: string): Promise<string> {
  const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['python3', '-c', FETCH, url] });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.data.stdout as string).trim();
}

/** Asks 127.0.0.11 (the engine's DNS) for the A record of a name: `answers <count>` or `no answer <error>`. */
const DNS_QUERY = `
import socket, struct, sys
query = struct.pack('>HHHHHH', 0x5d5d, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(p)]) + p.encode() for p in sys.argv[1].split('.')) + b'\\0' + struct.pack('>HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
try:
    s.connect(('127.0.0.11', 53)); s.send(query); print('answers', struct.unpack('>H', s.recv(512)[6:8])[0])
except Exception as e:
    print('no answer', type(e).__name__)
`;

/** What a query to 127.0.0.11 meets once the engine's DNS is closed: the sandbox's own packet filter refuses the send (EPERM), or an ICMP error. */
const REFUSED = /^no answer (PermissionError|ConnectionRefusedError)$/;

const isOpen = (result: string | undefined) => result?.startsWith('open') ?? false;

beforeAll(async () => {
  host = createServer((_req, res) => res.end('host-ok'));
  await new Promise<void>((resolve) => host.listen(0, '0.0.0.0', resolve));
  hostPort = (host.address() as AddressInfo).port;
  rt = await dockerRuntime({ networkName: NETWORK, proxy: true, proxyPort: 0 });
  const gateway = rt.backend.capabilities.gateway!;
  openGateway = await gateway.gatewayAddress('open');
  proxyGateway = await gateway.gatewayAddress('proxy');
  const bridges = new Set([openGateway, proxyGateway]);
  hostAddress = Object.entries(networkInterfaces())
    .filter(([iface]) => !/^(docker|br-|veth|nt)/.test(iface))
    .flatMap(([, addresses]) => addresses ?? [])
    .find((a) => a.family === 'IPv4' && !a.internal && !bridges.has(a.address))!.address;
});

afterAll(async () => {
  await rt?.dispose();
  await (rt?.backend as DockerBackend | undefined)?.egress.teardown();
  await new Promise((resolve) => host?.close(resolve));
});

describe('sandboxd networks', () => {
  it('puts networked sandboxes on its own network, never on the default bridge', async () => {
    const a = await create(uniqueName('net-a'));
    expect(a.network).toEqual({ egress: 'open', allow: [], deny: [] });
    const route = await api('POST', `/sandboxes/${a.name}/exec`, { command: ['cat', '/proc/net/route'] });
    expect(route.body.data.stdout).toContain('00000000');
    expect(a.ip).toBeDefined();
    expect(a.ip.startsWith('172.17.')).toBe(false);
  });

  it('one sandbox cannot reach another sandbox\'s server, which answers its own', async () => {
    const server = await create(uniqueName('net-srv'));
    const client = await create(uniqueName('net-cli'));
    const started = await api('POST', `/sandboxes/${server.name}/exec/detach`, { command: ['python3', '-m', 'http.server', '8000', '--bind', '0.0.0.0'] });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const target = `${server.ip}:8000`;
    await expect.poll(async () => isOpen((await probe(server.name, [target]))[target]), { timeout: 20_000 }).toBe(true);
    expect((await probe(client.name, [target]))[target]).toMatch(/^closed/);
  });

  it("an open sandbox reaches neither the host's addresses nor link-local ones, but the proxy port", async () => {
    const name = uniqueName('net-host');
    await create(name);
    const proxyPort = new URL(rt.services.egress.url!).port;
    const targets = [`${openGateway}:${hostPort}`, `${hostAddress}:${hostPort}`, `${proxyGateway}:${hostPort}`, '169.254.169.254:80', `${openGateway}:${proxyPort}`];
    const seen = await probe(name, targets);
    expect(seen[`${openGateway}:${hostPort}`]).toMatch(/^closed/);
    expect(seen[`${hostAddress}:${hostPort}`]).toMatch(/^closed/);
    expect(seen[`${proxyGateway}:${hostPort}`]).toMatch(/^closed/);
    expect(seen['169.254.169.254:80']).toMatch(/^closed/);
    expect(seen[`${openGateway}:${proxyPort}`]).toMatch(/^open HTTP\/1\.1/);
  });

  it('an allow entry naming a host address opens it, at create and by PATCH (at once, and closed again)', async () => {
    const allowed = uniqueName('net-allow');
    const made = await create(allowed, { network: { egress: 'open', allow: [hostAddress] } });
    expect(made.network).toEqual({ egress: 'open', allow: [hostAddress], deny: [] });
    const target = `${hostAddress}:${hostPort}`;
    const gatewayTarget = `${openGateway}:${hostPort}`;
    let seen = await probe(allowed, [target, gatewayTarget]);
    expect(seen[target]).toMatch(/^open .*/);
    expect(seen[gatewayTarget]).toMatch(/^closed/);

    const patched = await api('PATCH', `/sandboxes/${allowed}`, { network: { allow: [`${openGateway}/32`] } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data.network.allow).toEqual([`${openGateway}/32`]);
    seen = await probe(allowed, [target, gatewayTarget]);
    expect(seen[target]).toMatch(/^closed/);
    expect(seen[gatewayTarget]).toMatch(/^open/);

    // A restart moves the sandbox's address; its rules follow.
    expect((await api('POST', `/sandboxes/${allowed}/stop`)).status).toBe(200);
    expect((await api('POST', `/sandboxes/${allowed}/start`)).status).toBe(200);
    expect((await probe(allowed, [gatewayTarget]))[gatewayTarget]).toMatch(/^open/);

    expect((await api('PATCH', `/sandboxes/${allowed}`, { network: { allow: [] } })).status).toBe(200);
    expect((await probe(allowed, [gatewayTarget]))[gatewayTarget]).toMatch(/^closed/);
  });

  it('proxy egress: the proxy port is the only address it reaches, no DNS, and it gets the proxy env', async () => {
    const name = uniqueName('net-proxy');
    const made = await create(name, { network: { allow: ['pypi.org', '*.github.com'] } });
    expect(made.network).toEqual({ egress: 'proxy', allow: ['pypi.org', '*.github.com'], deny: [] });
    const proxyPort = new URL(rt.services.egress.url!).port;
    const targets = [`${proxyGateway}:${proxyPort}`, `${proxyGateway}:${hostPort}`, `${hostAddress}:${hostPort}`, `${openGateway}:${proxyPort}`, '169.254.169.254:80', '10.255.255.53:53', '1.1.1.1:443'];
    const seen = await probe(name, targets);
    expect(seen[`${proxyGateway}:${proxyPort}`]).toMatch(/^open HTTP\/1\.1/);
    for (const target of targets.slice(1)) expect(seen[target], target).toMatch(/^closed/);

    const dns = await api('POST', `/sandboxes/${name}/exec`, { command: ['python3', '-c', "import socket\ntry:\n  print(socket.getaddrinfo('pypi.org', 443))\nexcept Exception as e:\n  print('failed', e)"] });
    expect(dns.body.data.stdout).toMatch(/^failed/);

    const env = await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'echo "$HTTP_PROXY|$NO_PROXY"'] });
    const [proxy, noProxy] = (env.body.data.stdout as string).trim().split('|');
    expect(proxy).toMatch(new RegExp(`^http://sbx:sbx-${made.uuid}-[A-Za-z0-9_-]{43}@${proxyGateway.replace(/\./g, '\\.')}:${proxyPort}$`));
    expect(noProxy).toBe(`localhost,127.0.0.1,${proxyGateway}`);
  });

  it('proxy egress: through the egress proxy only what allow names, a PATCH applying at once', async () => {
    const name = uniqueName('net-via');
    await create(name, { network: { egress: 'proxy', allow: [hostAddress] } });
    expect(await fetchVia(name, `http://${hostAddress}:${hostPort}/`)).toBe('200 host-ok');
    expect(await fetchVia(name, `http://${openGateway}:${hostPort}/`)).toMatch(/^403 /);
    expect((await api('PATCH', `/sandboxes/${name}`, { network: { allow: ['pypi.org'] } })).status).toBe(200);
    expect(await fetchVia(name, `http://${hostAddress}:${hostPort}/`)).toMatch(/^403 /);
  });

  it("sandboxes do not find each other through the engine's DNS, before and after a restart", async () => {
    // Issue 25, item 14: 127.0.0.11 answered the container names of the other sandboxes.
    const other = await create(uniqueName('net-dns-b'));
    const asker = await create(uniqueName('net-dns-a'));
    const proxied = await create(uniqueName('net-dns-p'), { network: { egress: 'proxy' } });
    const ask = async (sandbox: string) => {
      const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['python3', '-c', DNS_QUERY, containerName(other)] });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body.data.stdout as string).trim();
    };
    const resolvConf = async (sandbox: string) => (await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['cat', '/etc/resolv.conf'] })).body.data.stdout as string;
    const nameservers = (text: string) => [...text.matchAll(/^nameserver (\S+)$/gm)].map((m) => m[1]);
    const upstream = engineResolvers().filter((resolver) => !resolver.includes(':')).slice(0, 3);
    expect(upstream.length).toBeGreaterThan(0);
    expect(await ask(asker.name)).toMatch(REFUSED);
    expect(nameservers(await resolvConf(asker.name))).toEqual(upstream);
    expect(await ask(proxied.name)).toMatch(REFUSED);
    expect(nameservers(await resolvConf(proxied.name))).toEqual([]);
    // The engine writes its file anew and the namespace is new at each start.
    expect((await api('POST', `/sandboxes/${asker.name}/stop`)).status).toBe(200);
    expect((await api('POST', `/sandboxes/${asker.name}/start`)).status).toBe(200);
    expect(await ask(asker.name)).toMatch(REFUSED);
    expect(nameservers(await resolvConf(asker.name))).toEqual(upstream);
    // Nor can root lift the rule: CAP_NET_ADMIN (bit 12) is outside the bounding set of every process there.
    const bounding = await api('POST', `/sandboxes/${asker.name}/exec`, { command: ['sh', '-c', 'grep CapBnd /proc/self/status | cut -f2'] });
    expect(BigInt(`0x${(bounding.body.data.stdout as string).trim()}`) & (1n << 12n)).toBe(0n);
  });

  it('egress none: no network at all', async () => {
    const name = uniqueName('net-none');
    const made = await create(name, { network: { egress: 'none' } });
    expect(made.network).toEqual({ egress: 'none', allow: [], deny: [] });
    expect(made.ip).toBeUndefined();
    const seen = await probe(name, [`${openGateway}:${hostPort}`]);
    expect(seen[`${openGateway}:${hostPort}`]).toMatch(/^closed/);
  });

  it('moves a sandbox made on Docker\'s default bridge (before these networks) onto its own at the next start', async () => {
    const { execFileSync } = await import('node:child_process');
    const name = uniqueName('net-old');
    await create(name);
    expect((await api('POST', `/sandboxes/${name}/stop`)).status).toBe(200);
    const id = (await rt.services.sandboxes.require(name)).backend_id!;
    execFileSync('docker', ['network', 'disconnect', NETWORK, id]);
    execFileSync('docker', ['network', 'connect', 'bridge', id]);
    expect((await api('POST', `/sandboxes/${name}/start`)).status).toBe(200);
    const networks = execFileSync('docker', ['inspect', '--format', '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}', id], { encoding: 'utf8' });
    expect(networks.trim()).toBe(NETWORK);
  });

  it('installs its chains once, hooked from DOCKER-USER and INPUT for its bridges only', async () => {
    const { execFileSync } = await import('node:child_process');
    const rules = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' });
    const chain = `${NETWORK.toUpperCase()}-EGRESS`;
    for (const from of ['DOCKER-USER', 'INPUT']) {
      for (const iface of [`${NETWORK}-o`, `${NETWORK}-p`]) {
        expect(rules.split('\n').filter((line) => line === `-A ${from} -i ${iface} -j ${chain}`)).toHaveLength(1);
      }
    }
  });
});
