import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { chainsOf } from '../../src/backends/docker/packet-filter.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { TCP_PROBE } from '../helpers/tcp-probe.js';

/**
 * What `open` sandboxes and the egress proxy reach of private networks (issue 25, item 10), and
 * how the packet filter's per-sandbox rules follow containers across a restart of the server
 * and a stop behind its back (item 18), on real Docker with a network name of this file's own.
 * The private network is a network namespace made here: a veth pair, the host's end
 * 10.<a>.<b>.1/30 and the namespace's end 10.<a>.<b>.2/30 with a listener, so that nothing past
 * this machine receives a packet. The reconcile loop is off: what happens, happens on events.
 */
const NETWORK = `pn${Math.random().toString(36).slice(2, 8)}`;
const RULES_CHAIN = chainsOf(NETWORK).rules;
const PYTHON = 'sandboxd/python:bookworm';
const suffix = Math.random().toString(36).slice(2, 7);
const NAMESPACE = `sbxpn-${suffix}`;
const HOST_END = `pnh${suffix}`;
const NS_END = `pnn${suffix}`;
const LISTEN_PORT = 18080;
let privateAddress: string;
let hostEnd: string;
let listener: ChildProcess | undefined;
let rt: DockerRuntime | undefined;
let hostAddress: string;

const sh = (command: string, args: string[]) => execFileSync(command, args, { encoding: 'utf8' });
const OUTSIDE_NAME = 'registry.npmjs.org';
const HOST_RESOLVES = (() => {
  try {
    return sh('getent', ['hosts', OUTSIDE_NAME]).length > 0;
  } catch {
    return false;
  }
})();
const inNamespace = (...args: string[]) => sh('ip', ['netns', 'exec', NAMESPACE, ...args]);

/** Prints `open <first bytes>` or `closed <error>` per target, the proxy variables dropped. */
/** Fetches a URL through the sandbox's proxy variables: `<status> <body>`. */
const FETCH = `
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r: print(r.status, r.read().decode())
except urllib.error.HTTPError as e: print(e.code, e.read().decode())
except Exception as e: print('failed', type(e).__name__)
`;

const api = (method: string, path: string, body?: unknown) => call(rt!.url, method, path, body);

async function exec(sandbox: string, command: string[]): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command, timeout_ms: 60_000 });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

async function probe(sandbox: string, target: string): Promise<string> {
  const out = await exec(sandbox, ['python3', '-c', TCP_PROBE, JSON.stringify([target])]);
  expect(out.exit_code, out.stderr).toBe(0);
  return (JSON.parse(out.stdout) as Record<string, string>)[target] ?? '';
}

async function create(name: string, network?: Record<string, unknown>): Promise<{ name: string; ip: string }> {
  const res = await api('POST', '/sandboxes', { name, image: PYTHON, ...(network ? { network } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

/** The RULES chain's rules naming a source address. */
const rulesOf = (ip: string) => sh('iptables', ['-w', '-S', RULES_CHAIN]).split('\n').filter((line) => line.includes(`-s ${ip}/32`));

const start = (flags: Record<string, unknown> = {}) =>
  dockerRuntime({ networkName: NETWORK, proxy: true, proxyPort: 0, reconcileInterval: 0, ...flags }, undefined, undefined, {
    resolve: async (name) => {
      if (name === 'private.test') return [{ address: privateAddress, family: 4 }];
      throw Object.assign(new Error('no'), { code: 'ENOTFOUND' });
    },
  });

beforeAll(async () => {
  // A /30 of 10/8 that no route of this host covers yet.
  const taken = sh('ip', ['-4', 'route', 'show']);
  let a = 0;
  let b = 0;
  do {
    a = 200 + Math.floor(Math.random() * 50);
    b = Math.floor(Math.random() * 250);
  } while (taken.includes(`10.${a}.${b}.`));
  privateAddress = `10.${a}.${b}.2`;
  hostEnd = `10.${a}.${b}.1`;
  sh('ip', ['netns', 'add', NAMESPACE]);
  sh('ip', ['link', 'add', HOST_END, 'type', 'veth', 'peer', 'name', NS_END]);
  sh('ip', ['link', 'set', NS_END, 'netns', NAMESPACE]);
  sh('ip', ['addr', 'add', `${hostEnd}/30`, 'dev', HOST_END]);
  sh('ip', ['link', 'set', HOST_END, 'up']);
  inNamespace('ip', 'addr', 'add', `${privateAddress}/30`, 'dev', NS_END);
  inNamespace('ip', 'link', 'set', NS_END, 'up');
  inNamespace('ip', 'link', 'set', 'lo', 'up');
  inNamespace('ip', 'route', 'add', 'default', 'via', hostEnd);
  listener = spawn('ip', ['netns', 'exec', NAMESPACE, process.execPath, '-e', `require('node:http').createServer((q, r) => r.end('private-ok')).listen(${LISTEN_PORT}, '${privateAddress}')`], { stdio: 'ignore' });
  for (let tries = 0; !inNamespace('ss', '-ltn').includes(`${privateAddress}:${LISTEN_PORT}`); tries++) {
    if (tries > 200) throw new Error(`nothing listens on ${privateAddress}:${LISTEN_PORT} in ${NAMESPACE}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // The host's address toward its default route (eth0's): the route is looked up, nothing is sent.
  hostAddress = /\bsrc (\S+)/.exec(sh('ip', ['-4', 'route', 'get', '192.0.2.123']))?.[1] ?? '';
  expect(hostAddress).not.toBe('');
  rt = await start();
});

afterAll(async () => {
  await rt?.dispose();
  await (rt?.backend as DockerBackend | undefined)?.egress.teardown();
  listener?.kill();
  try {
    sh('ip', ['netns', 'del', NAMESPACE]);
  } catch {
    // Made by beforeAll only when it got that far.
  }
});

describe('private networks (item 10)', () => {
  it('an open sandbox reaches no private address, unless an allow entry names it (with its port)', async () => {
    const target = `${privateAddress}:${LISTEN_PORT}`;
    // The host itself reaches it: the listener is there.
    expect(sh('curl', ['-s', '--max-time', '5', `http://${target}/`])).toBe('private-ok');
    const closed = await create(uniqueName('pn-closed'));
    expect(await probe(closed.name, target)).toMatch(/^closed/);
    const named = await create(uniqueName('pn-allow'), { egress: 'open', allow: [`${privateAddress}:${LISTEN_PORT}`] });
    expect(await probe(named.name, target)).toMatch(/^open HTTP\/1\.[01] 200.*private-ok/s);
    expect(await probe(named.name, `${privateAddress}:${LISTEN_PORT + 1}`)).toMatch(/^closed/);
  });

  // Only where the host itself resolves an outside name (through its resolvers, which Docker's DNS forwards to).
  it.skipIf(!HOST_RESOLVES)("DNS still works from an open sandbox: port 53 to the engine's resolvers is let through", async () => {
    const sandbox = await create(uniqueName('pn-dns'));
    const outside = await exec(sandbox.name, ['getent', 'hosts', OUTSIDE_NAME]);
    expect(outside.exit_code, outside.stderr).toBe(0);
    expect(outside.stdout).toContain(OUTSIDE_NAME);
  });

  it('the proxy refuses a name that resolves to a private address, unless an allow entry names it', async () => {
    const sandbox = await create(uniqueName('pn-proxy'), { egress: 'proxy', allow: ['private.test'] });
    const url = `http://private.test:${LISTEN_PORT}/`;
    expect(await exec(sandbox.name, ['python3', '-c', FETCH, url]).then((r) => r.stdout.trim())).toMatch(/^403 private\.test resolves to 10\./);
    expect((await api('PATCH', `/sandboxes/${sandbox.name}`, { network: { allow: ['private.test', `${privateAddress}:${LISTEN_PORT}`] } })).status).toBe(200);
    expect(await exec(sandbox.name, ['python3', '-c', FETCH, url]).then((r) => r.stdout.trim())).toBe('200 private-ok');
  });
});

describe('packet-filter rules across restarts (item 18)', () => {
  it('go at once when a container is killed behind sandboxd\'s back (the engine\'s die event), not at the next reconcile', async () => {
    const sandbox = await create(uniqueName('pn-kill'), { egress: 'open', allow: [hostAddress] });
    expect(rulesOf(sandbox.ip)).toHaveLength(1);
    const id = (await rt!.services.sandboxes.require(sandbox.name)).backend_id!;
    sh('docker', ['kill', id]);
    // No reconcile runs (interval 0): only the engine's die event can take the rule away.
    await expect.poll(() => rulesOf(sandbox.ip), { timeout: 15_000, interval: 200 }).toEqual([]);
  });

  it('are cleared at server start: none stays for a container that stopped while no server ran', async () => {
    const kept = await create(uniqueName('pn-kept'), { egress: 'open', allow: [hostAddress] });
    const gone = await create(uniqueName('pn-gone'), { egress: 'open', allow: [hostAddress] });
    expect(rulesOf(gone.ip)).toHaveLength(1);
    const goneId = (await rt!.services.sandboxes.require(gone.name)).backend_id!;
    const dataDir = rt!.dataDir;
    await rt!.close();
    // Behind the stopped server's back: the container stops, and its rule would stay stale.
    sh('docker', ['stop', '-t', '0', goneId]);
    expect(rulesOf(gone.ip)).toHaveLength(1);
    rt = await start({ dataDir });
    expect(rulesOf(gone.ip)).toEqual([]);
    expect(rulesOf(kept.ip)).toHaveLength(1);
    expect((await api('GET', `/sandboxes/${gone.name}`)).body.data.status).toBe('stopped');
  });
});
