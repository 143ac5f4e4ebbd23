import { cpus, totalmem } from 'node:os';
import type { Backend } from '../../backends/backend.js';
import { DEFAULT_DISK_MB } from '../../domain/disk.js';
import type { Profile } from '../../domain/profiles.js';

/** What a sandbox gets when its request does not say; pool instances are made with these. */
export const DEFAULT_LIMITS = { vcpus: 1, memory_mb: 512 } as const;
export const DEFAULT_PROFILE: Profile = 'moderate';

/**
 * The disk_mb of a sandbox whose request gives none, and of every pool instance: DEFAULT_DISK_MB,
 * or the whole storage where it is smaller; undefined (no bound) where the backend has no
 * `diskQuota`.
 */
export function defaultDiskMb(backend: Backend): number | undefined {
  const quota = backend.capabilities.diskQuota;
  return quota ? Math.min(DEFAULT_DISK_MB, quota.storageMb) : undefined;
}

/** `{ disk_mb }` of a pool instance's spec where the backend bounds disks, else nothing. */
export function defaultDisk(backend: Backend): { disk_mb?: number } {
  const diskMb = defaultDiskMb(backend);
  return diskMb === undefined ? {} : { disk_mb: diskMb };
}

/** What the host can give one sandbox: vcpus and memory_mb are checked against it. */
export interface HostLimits {
  cpus: number;
  memoryMb: number;
}

/** This host's limits. */
export const hostLimits = (): HostLimits => ({ cpus: cpus().length, memoryMb: Math.floor(totalmem() / 1024 / 1024) });
