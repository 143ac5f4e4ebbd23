import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxSpec } from '../../src/backends/backend.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { BASE_IMAGE } from '../helpers/docker-runtime.js';
import { docker, removeInstanceContainers, uniqueName } from '../helpers/docker.js';

/** The Docker backend's snapshot, archive, image and resize operations, below the services. */
const instanceId = uniqueName('isnap');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-snapshots-'));
const backend = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });
const repo = `sandboxd-itest-${instanceId}`;

const specOf = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: uniqueName('t'),
  uuid: randomUUID(),
  image: BASE_IMAGE,
  vcpus: 1,
  memory_mb: 256,
  profile: 'moderate',
  env: {},
  ...overrides,
});
const sh = async (id: string, script: string) => (await backend.exec(id, { command: ['sh', '-c', script], timeout_ms: 60_000 })).stdout;
const imageIds = async () => (await docker('images', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`)).split('\n').filter(Boolean);

beforeAll(() => backend.ping());
afterAll(async () => {
  await removeInstanceContainers(instanceId);
  for (const tag of await backend.listImages()) await backend.removeImage(tag);
  rmSync(dataDir, { recursive: true, force: true });
  await backend.close();
});

describe('DockerBackend snapshots', () => {
  it('keeps a tmpfs /workspace of a running gVisor sandbox and hands it to a sandbox made from the image', async () => {
    const source = await backend.create(specOf({ profile: 'restrictive' }));
    await sh(source.id, 'mkdir -p /workspace/d && echo kept > /workspace/d/f && echo gone > /tmp/t');
    await backend.snapshot(source.id, `${repo}:one`, 'snapshot');
    expect(await backend.listImages()).toEqual([`${repo}:one`]);
    // Helper containers do not outlive the snapshot.
    expect((await backend.list()).map((i) => i.role)).toEqual(['sandbox']);

    const copy = await backend.create(specOf({ profile: 'restrictive', image: `${repo}:one` }));
    expect(await sh(copy.id, 'cat /workspace/d/f; ls /tmp')).toBe('kept\n');
    expect(await sh(copy.id, 'echo more > /workspace/new && cat /workspace/new')).toBe('more\n');

    // A stopped restrictive sandbox has lost its tmpfs: its image must not bring back the old copy.
    await backend.stop(copy.id);
    await backend.snapshot(copy.id, `${repo}:two`, 'snapshot');
    const third = await backend.create(specOf({ profile: 'restrictive', image: `${repo}:two` }));
    expect(await sh(third.id, 'ls -A /workspace')).toBe('');
    for (const id of [source.id, copy.id, third.id]) await backend.remove(id);
    await backend.removeImage(`${repo}:two`);
  });

  it('archives (image kept, container gone), and a deleted image still in use goes with its last container', async () => {
    const source = await backend.create(specOf());
    await sh(source.id, 'echo archived > /home/sandbox/a');
    await backend.archive(source.id, `${repo}:arch`);
    expect(await backend.inspect(source.id)).toBeNull();
    const back = await backend.create(specOf({ image: `${repo}:arch` }));
    expect(await sh(back.id, 'cat /home/sandbox/a')).toBe('archived\n');

    const before = (await imageIds()).length;
    await backend.removeImage(`${repo}:arch`);
    expect(await backend.listImages()).not.toContain(`${repo}:arch`);
    expect(await sh(back.id, 'cat /home/sandbox/a')).toBe('archived\n');
    await backend.remove(back.id);
    expect((await imageIds()).length).toBeLessThan(before);
    expect(await backend.listImages()).not.toContain(`${repo}:arch`);
    await backend.removeImage(`${repo}:arch`);
    await backend.removeImage(`${repo}:never-was`);
  });

  it('resizes a running runc container in place and refuses a running gVisor one as UNSUPPORTED', async () => {
    const runc = await backend.create(specOf());
    await backend.resize(runc.id, { memory_mb: 300 });
    expect(await sh(runc.id, 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max')).toBe(`${300 * 1024 * 1024}\n`);
    const gvisor = await backend.create(specOf({ profile: 'restrictive' }));
    await expect(backend.resize(gvisor.id, { vcpus: 1 })).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    await expect(backend.resize(runc.id, { memory_mb: 1 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(backend.resize('no-such-container', { vcpus: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await backend.remove(runc.id);
    await backend.remove(gvisor.id);
  });
});
