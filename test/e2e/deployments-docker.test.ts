import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerEgress } from '../../src/backends/docker/docker-egress.js';
import { chainsOf } from '../../src/backends/docker/packet-filter.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { BASE_IMAGE, call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const docker = new Dockerode();
const run = `${process.pid}${Math.random().toString(36).slice(2, 6)}`;
/** The snapshot and the built image both servers make under the same name. */
const SNAPSHOT = `x-${run}`;
const IMAGE = `same-${run}`;
/** Serve flags: a proxy port of its own for each server (0: any free one), which its chain accepts. */
const FLAGS = ['--pool-size', '0', '--proxy', '--proxy-port', '0'];
/** No --network-name: each server gets its deployment's networks and chains. */
const OWN_NETWORK = { SANDBOXD_NETWORK_NAME: undefined };

interface Deployment {
  marker: 'A' | 'B';
  dataDir: string;
  server: ServerProcess;
  /** The network its sandboxes join (read from a container: the server's, whatever named it). */
  network?: string;
}

const api = (d: Deployment, method: string, path: string, body?: unknown) => call(d.server.url, method, path, body);
const ok = async (d: Deployment, method: string, path: string, body?: unknown) => {
  const answer = await api(d, method, path, body);
  expect(answer.status, `${d.marker} ${method} ${path}: ${JSON.stringify(answer.body)}`).toBeLessThan(300);
  return answer.body.data;
};
const cat = async (d: Deployment, box: string, path: string) => (await ok(d, 'POST', `/sandboxes/${box}/exec`, { command: ['cat', path] })).stdout as string;
const box = (d: Deployment, what: string) => `${what}-${d.marker.toLowerCase()}-${run}`;

/** The Docker network a sandbox's container is on. */
async function networkOf(name: string): Promise<string> {
  const [row] = await docker.listContainers({ all: true, filters: { label: [`sandboxd.name=${name}`] } });
  const networks = Object.keys(row?.NetworkSettings.Networks ?? {});
  expect(networks, `the networks of ${name}`).toHaveLength(1);
  return networks[0]!;
}

/** `iptables -S chain`: the chain's rules, or undefined when it does not exist. */
const chainRules = (chain: string) =>
  promisify(execFile)('iptables', ['-w', '-S', chain]).then(
    (out) => out.stdout,
    () => undefined,
  );

const deployments: Deployment[] = [];
const restart = async (d: Deployment) => {
  await d.server.stop();
  d.server = await startServer(d.dataDir, FLAGS, OWN_NETWORK);
};
const dispose = async (d: Deployment) => {
  for (const snapshot of (await api(d, 'GET', '/snapshots')).body.data ?? []) await api(d, 'DELETE', `/snapshots/${snapshot.name}`);
  for (const sandbox of (await api(d, 'GET', '/sandboxes')).body.data ?? []) await api(d, 'DELETE', `/sandboxes/${sandbox.name}`);
  await api(d, 'DELETE', `/images/${IMAGE}`);
  await d.server.stop();
  rmSync(d.dataDir, { recursive: true, force: true });
};
/** Removes a network name's networks and chains: never the shared `sandboxd` ones (other servers of this host use them). */
const teardownNetwork = async (name: string | undefined) => {
  if (name && name !== 'sandboxd') await new DockerEgress(docker, name, async () => null, silentLogger()).teardown();
};

/**
 * Two servers on one Docker engine, each with its own data directory (so its own deployment
 * id): what one makes, lists, removes and rebuilds never touches the other's.
 */
describe('two deployments on one engine', () => {
  /** Each server's build of IMAGE, as its POST /images answered. */
  const built: Record<string, { tag: string; id: string }> = {};
  beforeAll(async () => {
    for (const marker of ['A', 'B'] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), `sandboxd-deployment-${marker}-`));
      deployments.push({ marker, dataDir, server: await startServer(dataDir, FLAGS, OWN_NETWORK) });
    }
    // A first, then B: on a shared namespace B's would replace A's.
    for (const d of deployments) {
      await ok(d, 'POST', '/sandboxes', { name: box(d, 'src'), image: BASE_IMAGE });
      await ok(d, 'POST', `/sandboxes/${box(d, 'src')}/exec`, { command: ['sh', '-c', `echo ${d.marker} > /workspace/who`] });
      await ok(d, 'POST', '/snapshots', { name: SNAPSHOT, sandbox: box(d, 'src') });
      const image = await ok(d, 'POST', '/images', { name: IMAGE, dockerfile: `FROM ${BASE_IMAGE}\nUSER root\nRUN echo ${d.marker} > /who\n` });
      built[d.marker] = { tag: image.tag, id: image.id };
      d.network = await networkOf(box(d, 'src'));
    }
  }, 600_000);
  afterAll(async () => {
    for (const d of deployments) await dispose(d).catch(() => undefined);
    for (const d of deployments) await teardownNetwork(d.network).catch(() => undefined);
  });

  it('each restores its own snapshot x', async () => {
    for (const d of deployments) {
      await ok(d, 'POST', `/snapshots/${SNAPSHOT}/restore`, { as_name: box(d, 'restored') });
      expect(await cat(d, box(d, 'restored'), '/workspace/who'), `${d.marker}'s restore`).toBe(`${d.marker}\n`);
    }
    const [a, b] = deployments as [Deployment, Deployment];
    expect((await ok(a, 'GET', `/snapshots/${SNAPSHOT}`)).image_tag).not.toBe((await ok(b, 'GET', `/snapshots/${SNAPSHOT}`)).image_tag);
  });

  it('each runs its own built image of the same name, by its tag and by its name', async () => {
    expect(built.A!.tag).not.toBe(built.B!.tag);
    for (const d of deployments) {
      await ok(d, 'POST', '/sandboxes', { name: box(d, 'tagged'), image: built[d.marker]!.tag });
      expect(await cat(d, box(d, 'tagged'), '/who'), `${d.marker}'s image by tag`).toBe(`${d.marker}\n`);
      // `image: NAME` is the deployment's own built image.
      await ok(d, 'POST', '/sandboxes', { name: box(d, 'built'), image: IMAGE });
      expect(await cat(d, box(d, 'built'), '/who'), `${d.marker}'s image by name`).toBe(`${d.marker}\n`);
    }
  });

  it('GET /images and GET /snapshots of each list only its own (and the shared catalog)', async () => {
    for (const d of deployments) {
      const images = (await ok(d, 'GET', '/images')) as { name: string; kind: string; tag: string; id: string }[];
      expect(images.filter((i) => i.kind === 'built').map((i) => [i.name, i.id]), `${d.marker}'s built images`).toEqual([[IMAGE, built[d.marker]!.id]]);
      // Catalog images are the installation's: both list them.
      expect(images).toContainEqual(expect.objectContaining({ name: 'base', kind: 'catalog', tag: BASE_IMAGE, present: true }));
      const snapshots = (await ok(d, 'GET', '/snapshots')) as { name: string }[];
      expect(snapshots.map((s) => s.name)).toEqual([SNAPSHOT]);
    }
  });

  it("deleting B's snapshot and built image leaves A's restorable and runnable", async () => {
    const [a, b] = deployments as [Deployment, Deployment];
    await ok(b, 'DELETE', `/snapshots/${SNAPSHOT}`);
    for (const what of ['built', 'tagged']) await api(b, 'DELETE', `/sandboxes/${box(b, what)}`);
    await ok(b, 'DELETE', `/images/${IMAGE}`);
    expect((await api(b, 'GET', `/snapshots/${SNAPSHOT}`)).status).toBe(404);

    await ok(a, 'POST', `/snapshots/${SNAPSHOT}/restore`, { as_name: box(a, 'again') });
    expect(await cat(a, box(a, 'again'), '/workspace/who')).toBe('A\n');
    await ok(a, 'POST', '/sandboxes', { name: box(a, 'built2'), image: IMAGE });
    expect(await cat(a, box(a, 'built2'), '/who')).toBe('A\n');
  });

  it("the two servers' networks and packet-filter chains are distinct; one's restart neither rewrites the other's rules nor removes its containers", async () => {
    const [a, b] = deployments as [Deployment, Deployment];
    expect(a.network).toBeDefined();
    const chainA = chainsOf(a.network!).egress;
    const chainB = chainsOf(b.network!).egress;
    const rulesA = await chainRules(chainA);
    expect(rulesA).toContain('--dport');

    const sandboxesOf = async (d: Deployment) => ((await ok(d, 'GET', '/sandboxes')) as { name: string; status: string }[]).map((s) => [s.name, s.status]).sort();
    const beforeA = await sandboxesOf(a);
    // B starts again, with another proxy port, and reconciles its containers.
    await restart(b);
    expect(await chainRules(chainA)).toBe(rulesA);
    expect(await sandboxesOf(a)).toEqual(beforeA);
    expect(await cat(a, box(a, 'src'), '/workspace/who')).toBe('A\n');

    const beforeB = await sandboxesOf(b);
    const rulesB = await chainRules(chainB);
    await restart(a);
    expect(await chainRules(chainB)).toBe(rulesB);
    expect(await sandboxesOf(b)).toEqual(beforeB);
    expect(await cat(b, box(b, 'src'), '/workspace/who')).toBe('B\n');
    expect(a.network).not.toBe(b.network);
    expect(chainA).not.toBe(chainB);
  });
});

describe('serve --network-name', () => {
  it("names the server's networks and packet-filter chains", async () => {
    const name = `n${run}`.slice(0, 12);
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-network-name-'));
    const server = await startServer(dataDir, ['--pool-size', '0', '--network-name', name]);
    const d: Deployment = { marker: 'A', dataDir, server };
    try {
      await ok(d, 'POST', '/sandboxes', { name: box(d, 'named'), image: BASE_IMAGE });
      expect(await networkOf(box(d, 'named'))).toBe(name);
      const chains = chainsOf(name);
      expect(await chainRules(chains.egress)).toContain(`-A ${chains.egress} -j ${chains.rules}`);
      expect(await chainRules('DOCKER-USER')).toContain(`-A DOCKER-USER -i ${name}-o -j ${chains.egress}`);
    } finally {
      await dispose(d).catch(() => undefined);
      await teardownNetwork(name);
    }
  });
});
