import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writableBudget } from '../../../../src/backends/docker/container-spec.js';
import { btrfsQuotaMode, imageAllowanceMb, mountDevice } from '../../../../src/backends/docker/docker-storage.js';
import { DEFAULT_DISK_MB, MAX_DISK_MB } from '../../../../src/domain/disk.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const inject = async (method: 'GET' | 'POST', url: string, payload?: object) => {
  const response = await h.app.inject({ method, url, ...(payload ? { payload } : {}) });
  return { status: response.statusCode, body: response.json() as any };
};

/** A harness whose backend bounds disks (storage of `storageMb`), with a warm pool when asked. */
async function withQuota(storageMb = 20_480, poolSize = 0): Promise<FakeHarness> {
  const harness = await fakeHarness({ poolSize });
  harness.backend.storageMb = storageMb;
  harness.backend.declare('diskQuota');
  if (poolSize > 0) {
    harness.services.pool.warm();
    await harness.services.pool.settled();
  }
  return harness;
}

describe('disk_mb on POST /sandboxes', () => {
  it('refuses what is not a whole number of MiB within the bounds, naming disk_mb', async () => {
    h = await withQuota();
    for (const disk_mb of [0, -1, 63, 1.5, '100', null, true, MAX_DISK_MB + 1]) {
      const refused = await inject('POST', '/sandboxes', { name: 'd', disk_mb });
      expect(refused.status, JSON.stringify(disk_mb)).toBe(400);
      expect(refused.body.error, JSON.stringify(disk_mb)).toMatch(/^disk_mb: /);
    }
    // Past the engine's storage, though within MAX_DISK_MB.
    const tooBig = await inject('POST', '/sandboxes', { name: 'd', disk_mb: 30_000 });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error).toBe("disk_mb: at most 20480 (the size of the engine's storage)");
    expect((await inject('GET', '/sandboxes')).body.data).toEqual([]);
  });

  it('gives the sandbox the bound it asks for, or the default, shows it and passes it to the backend', async () => {
    h = await withQuota();
    const given = await inject('POST', '/sandboxes', { name: 'given', disk_mb: 2048 });
    expect(given.status).toBe(201);
    expect(given.body.data.disk_mb).toBe(2048);
    expect((await inject('POST', '/sandboxes', { name: 'default' })).body.data.disk_mb).toBe(DEFAULT_DISK_MB);
    expect((await inject('GET', '/sandboxes/given')).body.data.disk_mb).toBe(2048);
    const specs = [...h.backend.instances.values()].map((instance) => [instance.spec.name, instance.spec.disk_mb]);
    expect(specs).toEqual([['given', 2048], ['default', DEFAULT_DISK_MB]]);
    expect((await inject('GET', '/status')).body.data.capabilities).toContain('disk_quota');
  });

  it('defaults to the whole storage where it is smaller than the default', async () => {
    h = await withQuota(5_000);
    expect((await inject('POST', '/sandboxes', { name: 'small' })).body.data.disk_mb).toBe(5_000);
  });

  it('is UNSUPPORTED where the backend bounds no disk, and absent from sandboxes made there', async () => {
    h = await fakeHarness();
    const refused = await inject('POST', '/sandboxes', { name: 'd', disk_mb: 1024 });
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe('UNSUPPORTED');
    expect(refused.body.error).toContain('disk_mb');
    const made = await inject('POST', '/sandboxes', { name: 'plain' });
    expect(made.status).toBe(201);
    expect(made.body.data.disk_mb).toBeUndefined();
    expect([...h.backend.instances.values()][0]!.spec.disk_mb).toBeUndefined();
  });

  it('claims a pool instance only for the default bound; another bound gets a sandbox of its own', async () => {
    h = await withQuota(20_480, 1);
    const [pooledId] = [...h.backend.instances.keys()];
    expect(h.backend.instances.get(pooledId!)!.spec.disk_mb).toBe(DEFAULT_DISK_MB);
    const other = await inject('POST', '/sandboxes', { name: 'other', disk_mb: 1024 });
    expect(other.status).toBe(201);
    // Not the pool instance: that one is still ready, unclaimed.
    expect(h.backend.instances.get(pooledId!)!.spec.name).toMatch(/^pool-/);
    const mine = [...h.backend.instances.values()].find((instance) => instance.spec.name === 'other')!;
    expect(mine.spec.disk_mb).toBe(1024);
    expect(mine.state.id).not.toBe(pooledId);
    // The default bound takes the pool instance.
    await inject('POST', '/sandboxes', { name: 'pooled' });
    expect(h.backend.instances.get(pooledId!)!.spec.name).toBe('pooled');
  });

  it('is kept by a snapshot and given back by its restore', async () => {
    h = await withQuota();
    await inject('POST', '/sandboxes', { name: 'src', disk_mb: 3000 });
    const snapshot = await inject('POST', '/snapshots', { name: 'snap', sandbox: 'src' });
    expect(snapshot.body.data.disk_mb).toBe(3000);
    const restored = await inject('POST', '/snapshots/snap/restore', { as_name: 'back' });
    expect(restored.body.data.disk_mb).toBe(3000);
  });
});

describe('writableBudget (Docker)', () => {
  it('keeps each tmpfs within a quarter of memory and all of them with /dev/shm within disk_mb', () => {
    // No bound: a quarter of memory each, the engine's /dev/shm, no layer quota.
    expect(writableBudget({ memory_mb: 512 }, true, 2, 0)).toEqual({ tmpfsMb: 128 });
    // Read-only root, 2 tmpfs + /dev/shm share 96 MiB.
    expect(writableBudget({ memory_mb: 512, disk_mb: 96 }, true, 2, 0)).toMatchObject({ tmpfsMb: 32, shmMb: 32 });
    // A reusable sandbox's four tmpfs mounts share it too.
    expect(writableBudget({ memory_mb: 512, disk_mb: 100 }, true, 4, 0)).toMatchObject({ tmpfsMb: 20, shmMb: 20 });
    // Memory still bounds each tmpfs where the disk is large.
    expect(writableBudget({ memory_mb: 512, disk_mb: DEFAULT_DISK_MB }, true, 2, 0)).toMatchObject({ tmpfsMb: 128, shmMb: 64 });
  });

  it('gives a writable root what /dev/shm leaves, on top of its image where the limit counts it', () => {
    const image = imageAllowanceMb(200 * 1024 * 1024);
    expect(image).toBeGreaterThan(200);
    const budget = writableBudget({ memory_mb: 512, disk_mb: 96 }, false, 0, image);
    expect(budget.shmMb).toBe(12);
    expect(budget.layerMb).toBe(image + 96 - 12);
    expect(writableBudget({ memory_mb: 512, disk_mb: DEFAULT_DISK_MB }, false, 0, image).shmMb).toBe(64);
    // Simple quotas count only writes: the layer gets exactly what /dev/shm leaves.
    expect(writableBudget({ memory_mb: 512, disk_mb: 96 }, false, 0, 0).layerMb).toBe(96 - 12);
    // A read-only root's layer is bounded too, to a small floor.
    expect(writableBudget({ memory_mb: 512, disk_mb: 96 }, true, 2, 0).layerMb).toBe(8);
  });
});

describe('btrfs quota mode (Docker)', () => {
  const mountinfo = [
    '22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw',
    '80 22 0:45 / /var/lib/sandboxd-docker rw,relatime shared:40 - btrfs /dev/loop0 rw,space_cache=v2',
    '81 80 0:46 / /var/lib/sandboxd-docker/btrfs/subvolumes/abc rw - btrfs /dev/loop0 rw',
    '90 22 0:47 / /var/lib/other\\040root rw - btrfs /dev/loop3 rw',
  ].join('\n');

  it('finds the device of the btrfs mount holding a path, the longest mount point first', () => {
    expect(mountDevice(mountinfo, '/var/lib/sandboxd-docker')).toBe('/dev/loop0');
    expect(mountDevice(mountinfo, '/var/lib/sandboxd-docker/image')).toBe('/dev/loop0');
    expect(mountDevice(mountinfo, '/var/lib/other root/x')).toBe('/dev/loop3');
    // A prefix of a name is not a parent, and ext4 is not btrfs.
    expect(mountDevice(mountinfo, '/var/lib/sandboxd-docker2')).toBeUndefined();
    expect(mountDevice(mountinfo, '/var/lib/docker')).toBeUndefined();
  });

  it('reads the mode the kernel reports for that device, undefined where there is none', async () => {
    const sys = mkdtempSync(join(tmpdir(), 'sysfs-btrfs-'));
    const info = join(sys, 'mountinfo');
    writeFileSync(info, mountinfo);
    for (const [fsid, device, mode] of [['a1', 'loop3', 'qgroup'], ['b2', 'loop0', 'squota']] as const) {
      mkdirSync(join(sys, fsid, 'devices', device), { recursive: true });
      mkdirSync(join(sys, fsid, 'qgroups'));
      writeFileSync(join(sys, fsid, 'qgroups', 'mode'), `${mode}\n`);
    }
    try {
      expect(await btrfsQuotaMode('/var/lib/sandboxd-docker', sys, info)).toBe('squota');
      expect(await btrfsQuotaMode('/var/lib/other root', sys, info)).toBe('qgroup');
      expect(await btrfsQuotaMode('/srv', sys, info)).toBeUndefined();
    } finally {
      rmSync(sys, { recursive: true, force: true });
    }
  });
});
