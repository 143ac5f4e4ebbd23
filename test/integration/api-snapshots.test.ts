import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { manualClock } from '../helpers/manual-clock.js';

/** Snapshots, restore, archive with files and resize, on real Docker (runc and gVisor). */
const docker = new Docker();
const time = manualClock(new Date().toISOString());
const prefix = `sandboxd-snapshot-it${process.pid}`;
/** The image tag of snapshot `name`: under this server's deployment id. */
const tagOf = (name: string) => `${prefix}/${rt.deploymentId}:${name}`;
let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

beforeAll(async () => {
  rt = await dockerRuntime({ gcInterval: 0, reconcileInterval: 0, snapshotPrefix: prefix }, time.clock);
  api = (method, path, body) => call(rt.url, method, path, body);
});
afterAll(async () => rt?.dispose());

const imageExists = (tag: string) => docker.getImage(tag).inspect().then(() => true, () => false);
const exec = async (name: string, command: string[]) => (await api('POST', `/sandboxes/${name}/exec`, { command })).body.data;
const read = async (name: string, path: string) => (await api('GET', `/sandboxes/${name}/files${path}`)).body.data?.content;
/** The uid owning a path (through python: gVisor's runsc here lacks statx, which ls -l and stat need). */
const owner = async (name: string, path: string) => (await exec(name, ['python3', '-c', `import os; print(os.stat('${path}').st_uid)`])).output.trim();

/** Writes files, snapshots the running sandbox, restores it twice and reads everything back. */
async function snapshotRoundTrip(profile: 'moderate' | 'restrictive') {
  const source = uniqueName(`snap-${profile}`);
  expect((await api('POST', '/sandboxes', { name: source, profile, memory_mb: 256 })).status).toBe(201);
  await api('POST', `/sandboxes/${source}/files`, { files: { '/workspace/a.txt': 'alpha', '/workspace/sub/b.bin': 'beta' } });
  await exec(source, ['sh', '-c', 'head -c 3000000 /dev/urandom > /workspace/big && sha256sum /workspace/big > /workspace/big.sum']);
  const sum = await read(source, '/workspace/big.sum');

  const snapName = uniqueName('s');
  const created = await api('POST', '/snapshots', { sandbox: source, name: snapName });
  expect(created.status).toBe(201);
  expect(created.body.data).toMatchObject({ name: snapName, sandbox: source, image_tag: tagOf(snapName), backend: 'docker', base_image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 256, profile });
  const labels = (await docker.getImage(tagOf(snapName)).inspect()).Config.Labels;
  expect(labels).toMatchObject({ 'sandboxd.saved': 'snapshot', 'sandboxd.instance': expect.any(String) });
  expect(labels['sandboxd.workspace-archive']).toBe(profile === 'restrictive' ? '/.sandboxd-workspace.tar' : undefined);
  expect((await api('GET', `/sandboxes/${source}`)).body.data.status).toBe('running');
  expect((await api('POST', '/snapshots', { sandbox: source, name: snapName })).status).toBe(409);
  await api('PUT', `/sandboxes/${source}/files/workspace/a.txt`, { content: 'changed after the snapshot' });

  const first = await api('POST', `/snapshots/${snapName}/restore`, {});
  expect(first.status).toBe(201);
  expect(first.body.data).toMatchObject({ name: `${source}-restored`, status: 'running', profile, memory_mb: 256, image: 'sandboxd/base:bookworm' });
  const secondName = uniqueName('copy');
  const second = await api('POST', `/snapshots/${snapName}/restore`, { as_name: secondName });
  expect(second.status).toBe(201);
  for (const name of [`${source}-restored`, secondName]) {
    expect(await read(name, '/workspace/a.txt')).toBe('alpha');
    expect(await read(name, '/workspace/sub/b.bin')).toBe('beta');
    expect((await exec(name, ['sha256sum', '/workspace/big'])).output).toBe(sum);
    expect(await owner(name, '/workspace/a.txt')).toBe('1000');
  }
  expect((await api('POST', `/snapshots/${snapName}/restore`, { as_name: secondName })).status).toBe(409);
  expect(((await api('GET', `/sandboxes/${secondName}/logs`)).body.data as { event: string }[]).map((e) => e.event)).toContain('snapshot_restored');

  // Deleting the snapshot removes its image; the restored sandboxes live on.
  expect((await api('DELETE', `/snapshots/${snapName}`)).body.data).toBe(`snapshot '${snapName}' deleted`);
  expect(await imageExists(tagOf(snapName))).toBe(false);
  expect((await api('GET', `/snapshots/${snapName}`)).status).toBe(404);
  expect(await read(secondName, '/workspace/a.txt')).toBe('alpha');
  for (const name of [source, `${source}-restored`, secondName]) expect((await api('DELETE', `/sandboxes/${name}`)).status).toBe(200);
}

describe('snapshots on Docker', () => {
  it('snapshot and restore twice keep every file (moderate, runc)', () => snapshotRoundTrip('moderate'));

  it('snapshot and restore twice keep the tmpfs /workspace (restrictive, gVisor)', () => snapshotRoundTrip('restrictive'));

  it('leaves no image behind once snapshots and restored sandboxes are gone', async () => {
    const images = await docker.listImages({ filters: { reference: [`${prefix}/${rt.deploymentId}:*`] } });
    expect(images).toEqual([]);
  });
});

describe('archive and recover with files on Docker', () => {
  it('a restrictive sandbox keeps its tmpfs /workspace through archive, recover and start', async () => {
    const name = uniqueName('arch-r');
    const sb = (await api('POST', '/sandboxes', { name, profile: 'restrictive', lifecycle: { auto_archive_after_seconds: 60 } })).body.data;
    await api('PUT', `/sandboxes/${name}/files/workspace/keep/me.txt`, { content: 'in a tmpfs' });
    time.advance(60);
    expect((await api('POST', '/lifecycle/reconcile')).body.data.archived).toContain(name);
    expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('archived');
    expect((await api('POST', `/sandboxes/${name}/recover`)).body.data.status).toBe('stopped');
    expect((await api('POST', `/sandboxes/${name}/start`)).body.data).toMatchObject({ status: 'running', runtime: 'runsc' });
    expect(await read(name, '/workspace/keep/me.txt')).toBe('in a tmpfs');
    expect((await api('PUT', `/sandboxes/${name}/files/workspace/new.txt`, { content: 'writable' })).status).toBe(200);
    await api('DELETE', `/sandboxes/${name}`);
    await rt.services.departures.settled();
    expect(await imageExists(`sandboxd-archive:${sb.uuid}`)).toBe(false);
  });
});

describe('resize on Docker', () => {
  /** cgroup v1 and v2 files, read inside the sandbox: [cpu quota/period, memory limit]. */
  const limits = async (name: string) => {
    const script =
      'if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max; ' +
      'else echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; fi';
    const [cpu, memory] = (await exec(name, ['sh', '-c', script])).output.trim().split('\n');
    const [quota, period] = cpu.split(' ').map(Number);
    return { vcpus: quota / period, memoryMb: Number(memory) / 1024 / 1024 };
  };

  it('changes the limits of a running sandbox in place and of a stopped one for its start', async () => {
    const name = uniqueName('resize');
    const sb = (await api('POST', '/sandboxes', { name, vcpus: 1, memory_mb: 256 })).body.data;
    expect(await limits(name)).toEqual({ vcpus: 1, memoryMb: 256 });
    const resized = await api('POST', `/sandboxes/${name}/resize`, { vcpus: 2, memory_mb: 384 });
    expect(resized.status).toBe(200);
    expect(resized.body.data).toMatchObject({ vcpus: 2, memory_mb: 384, status: 'running' });
    expect(await limits(name)).toEqual({ vcpus: 2, memoryMb: 384 });
    const container = (await docker.listContainers({ filters: { label: [`sandboxd.uuid=${sb.uuid}`] } }))[0]!;
    expect(container.Id).toBe((await docker.getContainer(container.Id).inspect()).Id);

    await api('POST', `/sandboxes/${name}/stop`);
    expect((await api('POST', `/sandboxes/${name}/resize`, { memory_mb: 200 })).body.data).toMatchObject({ memory_mb: 200, status: 'stopped' });
    await api('POST', `/sandboxes/${name}/start`);
    expect(await limits(name)).toEqual({ vcpus: 2, memoryMb: 200 });

    for (const body of [{}, { vcpus: 0 }, { vcpus: 1000 }, { memory_mb: 1 }, { memory_mb: 10_000_000 }, { vcpus: 'two' }, { cpus: 2 }]) {
      expect((await api('POST', `/sandboxes/${name}/resize`, body)).status, JSON.stringify(body)).toBe(400);
    }
    const events = ((await api('GET', `/sandboxes/${name}/logs`)).body.data as { event: string }[]).filter((e) => e.event === 'sandbox_resized');
    expect(events).toHaveLength(2);
    await api('DELETE', `/sandboxes/${name}`);
  });

  it('answers 422 for a running gVisor sandbox, which cannot be resized in place, and resizes it stopped', async () => {
    const name = uniqueName('resize-r');
    await api('POST', '/sandboxes', { name, profile: 'restrictive', memory_mb: 256 });
    const refused = await api('POST', `/sandboxes/${name}/resize`, { memory_mb: 300 });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toContain('stop it');
    await api('POST', `/sandboxes/${name}/stop`);
    expect((await api('POST', `/sandboxes/${name}/resize`, { memory_mb: 300 })).status).toBe(200);
    expect((await api('POST', `/sandboxes/${name}/start`)).body.data.memory_mb).toBe(300);
    await api('DELETE', `/sandboxes/${name}`);
  });
});
