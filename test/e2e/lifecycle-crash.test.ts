import Docker from 'dockerode';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * kill -9 in the middle of an archive and of a snapshot (a restrictive sandbox, so the helper
 * container and the intermediate image are in play too): after a restart the state is
 * consistent, the files are still there, and no container or image of ours is unaccounted for.
 */
const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-lifecrash-'));
const prefix = `sandboxd-snapshot-crash${process.pid}`;
// No warm pool: these crashes are about archives and snapshots; crash-recovery.test.ts kills a
// server with a pool.
const args = ['--gc-interval', '0', '--reconcile-interval', '0', '--snapshot-prefix', prefix, '--pool-size', '0'];
let server: ServerProcess | undefined;
let instance = '';

afterAll(async () => {
  try {
    if (server) {
      for (const s of (await call(server.url, 'GET', '/snapshots')).body.data as { name: string }[]) await call(server.url, 'DELETE', `/snapshots/${s.name}`);
      for (const sb of (await call(server.url, 'GET', '/sandboxes')).body.data as { name: string }[]) await call(server.url, 'DELETE', `/sandboxes/${sb.name}`);
    }
  } finally {
    await server?.stop();
  }
  // Whatever a failed run left behind: only this data directory's own containers and images.
  if (instance) {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`sandboxd.instance=${instance}`] } })) await docker.getContainer(c.Id).remove({ force: true });
    for (const i of await docker.listImages({ filters: { label: [`sandboxd.instance=${instance}`] } })) await docker.getImage(i.Id).remove({ force: true }).catch(() => undefined);
  }
  rmSync(dir, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown) => call(server!.url, method, path, body);
const restart = async () => {
  await server!.kill9();
  server = await startServer(dir, args);
};

/** Every container and image of this instance belongs to a sandbox or a snapshot the API lists. */
async function expectNothingLeaked() {
  const sandboxes = (await api('GET', '/sandboxes')).body.data as { uuid: string; status: string }[];
  const snapshots = (await api('GET', '/snapshots')).body.data as { image_tag: string }[];
  // A restrictive snapshot spools its workspace to the host; a restart sweeps what a kill left.
  expect(readdirSync(tmpdir()).filter((entry) => entry.startsWith(`sandboxd-workspace-${instance}-`))).toEqual([]);
  const allowed = new Set([...snapshots.map((s) => s.image_tag), ...sandboxes.map((s) => `sandboxd-archive:${s.uuid}`)]);
  const unaccounted = async () => {
    const containers = await docker.listContainers({ all: true, filters: { label: [`sandboxd.instance=${instance}`] } });
    const images = await docker.listImages({ filters: { label: [`sandboxd.instance=${instance}`, 'sandboxd.saved'] } });
    return [
      ...containers.filter((c) => c.Labels['sandboxd.role'] !== 'sandbox' || !sandboxes.some((s) => s.uuid === c.Labels['sandboxd.uuid'])).map((c) => `container ${c.Names[0]}`),
      ...images.flatMap((image) => {
        const tags = (image.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
        return tags.length === 0 ? [`untagged image ${image.Id}`] : tags.filter((tag) => !allowed.has(tag)).map((tag) => `image ${tag}`);
      }),
    ];
  };
  // A deleted sandbox's container and archive image go in the background, shortly after its DELETE answered.
  await expect.poll(unaccounted, { timeout: 15_000 }).toEqual([]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('lifecycle recovery after kill -9', () => {
  it('an interrupted archive is finished or rolled back, and the files survive either way', async () => {
    server = await startServer(dir, args);
    const name = 'arch-crash';
    const created = await api('POST', '/sandboxes', { name, lifecycle: { auto_archive_after_seconds: 1 } });
    expect(created.status).toBe(201);
    const [row] = await docker.listContainers({ all: true, filters: { label: [`sandboxd.uuid=${created.body.data.uuid}`] } });
    instance = row!.Labels['sandboxd.instance']!;
    await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'head -c 100000000 /dev/urandom > /home/sandbox/big; sha256sum /home/sandbox/big > /workspace/sum'] });
    const sum = (await api('GET', `/sandboxes/${name}/files/workspace/sum`)).body.data.content;

    const outcomes: string[] = [];
    for (const delay of [30, 250, 700, 1500]) {
      // The policy is due once a second has passed since the last activity.
      while ((await api('POST', '/lifecycle/reconcile', { dry_run: true })).body.data.actions.length === 0) await sleep(100);
      void api('POST', '/lifecycle/reconcile').catch(() => undefined);
      await sleep(delay);
      await restart();
      await expectNothingLeaked();
      const status = (await api('GET', `/sandboxes/${name}`)).body.data.status as string;
      outcomes.push(status);
      if (status === 'archived') {
        expect((await api('POST', `/sandboxes/${name}/recover`)).status).toBe(200);
        expect((await api('POST', `/sandboxes/${name}/start`)).status).toBe(200);
      }
      expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('running');
      expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['sha256sum', '/home/sandbox/big'] })).body.data.output).toBe(sum);
    }
    expect(outcomes.every((s) => s === 'running' || s === 'archived')).toBe(true);
  });

  it('an interrupted snapshot is either whole and restorable or gone without a trace', async () => {
    const name = 'snap-crash';
    expect((await api('POST', '/sandboxes', { name, profile: 'restrictive', memory_mb: 512 })).status).toBe(201);
    await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'head -c 60000000 /dev/urandom > /workspace/big; sha256sum /workspace/big > /workspace/sum'] });
    const sum = (await api('GET', `/sandboxes/${name}/files/workspace/sum`)).body.data.content;

    const kept: string[] = [];
    for (const [i, delay] of [50, 400, 1000, 2000].entries()) {
      const snap = `crash-${i}`;
      void api('POST', '/snapshots', { sandbox: name, name: snap }).catch(() => undefined);
      await sleep(delay);
      await restart();
      await expectNothingLeaked();
      const got = await api('GET', `/snapshots/${snap}`);
      if (got.status === 200) kept.push(snap);
      else expect(got.status).toBe(404);
      expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('running');
    }
    for (const snap of kept) {
      const restored = await api('POST', `/snapshots/${snap}/restore`, { as_name: `${snap}-r` });
      expect(restored.status).toBe(201);
      expect((await api('POST', `/sandboxes/${snap}-r/exec`, { command: ['sha256sum', '/workspace/big'] })).body.data.output).toBe(sum);
      await api('DELETE', `/sandboxes/${snap}-r`);
    }
    // A name a crash left unused can be taken again.
    expect((await api('POST', '/snapshots', { sandbox: name, name: 'crash-0' })).status).toBe(kept.includes('crash-0') ? 409 : 201);
    await expectNothingLeaked();
  });
});
