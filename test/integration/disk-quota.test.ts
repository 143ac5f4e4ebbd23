import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecRequest, InstanceState, Profile } from '../../src/backends/backend.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { docker, removeInstanceContainers, sandboxSpec, uniqueName } from '../helpers/docker.js';

const instanceId = uniqueName('itest-disk');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-disk-'));
const backend = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });
const PROFILES: Profile[] = ['permissive', 'moderate', 'restrictive'];
/** Small enough that filling it is quick, far below every tmpfs's memory bound. */
const DISK_MB = 96;

const sh = (id: string, script: string, extra: Partial<ExecRequest> = {}) => backend.exec(id, { command: ['sh', '-c', script], timeout_ms: 120_000, ...extra });
const sudo = { user: 'root' };
/** What a write past the bound prints: btrfs qgroups give EDQUOT, a full tmpfs ENOSPC. */
const FULL = /Disk quota exceeded|No space left on device/;

const sandboxes = {} as Record<Profile, InstanceState>;

beforeAll(async () => {
  await backend.ping();
  const created = await Promise.all(PROFILES.map((profile) => backend.create(sandboxSpec({ profile, memory_mb: 512, disk_mb: DISK_MB }))));
  PROFILES.forEach((profile, i) => (sandboxes[profile] = created[i]!));
}, 180_000);

afterAll(async () => {
  await removeInstanceContainers(instanceId);
  await backend.close();
  rmSync(dataDir, { recursive: true, force: true });
}, 600_000);

/** The sandbox still runs commands and can write again once the big file is gone. */
async function lives(id: string, path: string, as: Partial<ExecRequest> = {}): Promise<void> {
  expect((await sh(id, `rm -f ${path}/fill; echo alive`, as)).stdout).toBe('alive\n');
  const again = await sh(id, `echo again > ${path}/again && cat ${path}/again && rm ${path}/again`, as);
  expect(again.stdout, `${path}: ${again.stderr}`).toBe('again\n');
}

describe('disk_mb on Docker', () => {
  it('is offered on this engine (btrfs data-root), with the storage size as its bound', () => {
    expect(backend.capabilities.diskQuota, 'setup puts the engine on btrfs: bash scripts/setup.sh').toBeDefined();
    expect(backend.capabilities.diskQuota!.storageMb).toBeGreaterThan(1024);
  });

  it('fails a write past disk_mb in /workspace and /tmp in every profile, and the sandbox lives', async () => {
    for (const profile of PROFILES) {
      const { id } = sandboxes[profile];
      for (const path of ['/workspace', '/tmp']) {
        const fill = await sh(id, `dd if=/dev/zero of=${path}/fill bs=1M count=${DISK_MB * 3}`);
        expect(fill.exit_code, `${profile} ${path}`).not.toBe(0);
        expect(fill.stderr, `${profile} ${path}`).toMatch(FULL);
        await lives(id, path);
      }
    }
  });

  it('fails a write past disk_mb by root in the root file system where it is writable', async () => {
    for (const profile of ['permissive', 'moderate'] as const) {
      const { id } = sandboxes[profile];
      const fill = await sh(id, `dd if=/dev/zero of=/fill bs=1M count=${DISK_MB * 3}`, sudo);
      expect(fill.exit_code, profile).not.toBe(0);
      expect(fill.stderr, profile).toMatch(FULL);
      await lives(id, '', sudo);
    }
    // Restrictive has no writable root at all.
    expect((await sh(sandboxes.restrictive.id, 'touch /fill', sudo)).stderr).toMatch(/Read-only file system/);
  });

  it('bounds the writable paths together, not each on its own', async () => {
    for (const profile of PROFILES) {
      const { id } = sandboxes[profile];
      // Each path takes what it can; together they stay within disk_mb (and /dev/shm counts too).
      await sh(id, `for p in /workspace /tmp /dev/shm; do dd if=/dev/zero of=$p/fill bs=1M count=${DISK_MB} 2>/dev/null; done; sync`);
      const used = await sh(id, 'du -smc /workspace/fill /tmp/fill /dev/shm/fill | tail -n 1');
      // A writable root's bound also holds its image's blocks, estimated with a margin (docker-storage.ts).
      expect(Number.parseInt(used.stdout, 10), profile).toBeLessThanOrEqual(profile === 'restrictive' ? DISK_MB : DISK_MB + 32);
      expect((await sh(id, 'rm -f /workspace/fill /tmp/fill /dev/shm/fill; echo alive')).stdout).toBe('alive\n');
    }
  });

  it('leaves another sandbox and the host unaffected', async () => {
    const { id } = sandboxes.moderate;
    const other = await backend.create(sandboxSpec({ name: uniqueName('other') }));
    try {
      const fill = await sh(id, `dd if=/dev/zero of=/tmp/fill bs=1M count=${DISK_MB * 3}`);
      expect(fill.stderr).toMatch(FULL);
      // The other sandbox, made without a bound, writes more than the full one could.
      const write = await sh(other.id, `dd if=/dev/zero of=/tmp/big bs=1M count=${DISK_MB * 2} && echo written`);
      expect(write.stdout).toContain('written');
      await lives(id, '/tmp');
    } finally {
      await backend.remove(other.id);
    }
  });

  it('is set on the container: a quota on its writable layer, bounded tmpfs and /dev/shm', async () => {
    const moderate = JSON.parse(await docker('inspect', sandboxes.moderate.id))[0];
    expect(moderate.HostConfig.StorageOpt.size).toMatch(/^\d+m$/);
    expect(moderate.HostConfig.ShmSize).toBeLessThanOrEqual((DISK_MB / 8) * 1024 * 1024);
    expect(moderate.Config.Labels['sandboxd.disk_mb']).toBe(String(DISK_MB));
    const restrictive = JSON.parse(await docker('inspect', sandboxes.restrictive.id))[0];
    expect(restrictive.HostConfig.Tmpfs['/workspace']).toContain(`size=${Math.floor(DISK_MB / 3)}m`);
  });

  it('cannot be changed by claiming a pool instance made with another', async () => {
    const pooled = await backend.create(sandboxSpec({ name: uniqueName('pool'), role: 'pool', disk_mb: 200 }));
    try {
      await expect(backend.claim(pooled.id, sandboxSpec({ uuid: pooled.uuid, disk_mb: 300 }))).rejects.toMatchObject({ code: 'UNSUPPORTED' });
      // The same bound is claimed as before.
      await backend.claim(pooled.id, sandboxSpec({ uuid: pooled.uuid, disk_mb: 200 }));
    } finally {
      await backend.remove(pooled.id);
    }
  });
});
