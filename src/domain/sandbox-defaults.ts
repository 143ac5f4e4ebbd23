import { DEFAULT_DISK_MB } from './disk.js';
import type { Profile } from './profiles.js';

/** What a sandbox gets when its request does not say; pool instances are made with these. */
export const DEFAULT_LIMITS = { vcpus: 1, memory_mb: 512 } as const;
export const DEFAULT_PROFILE: Profile = 'moderate';

/**
 * What the defaults read of a backend: its disk quota capability, where it has one. Structural,
 * so that this leaf needs no import of backends/ (a Backend is one).
 */
export interface DiskQuotaHolder {
  capabilities: { diskQuota?: { storageMb: number } };
}

/**
 * The disk_mb of a sandbox whose request gives none, and of every pool instance: DEFAULT_DISK_MB,
 * or the whole storage where it is smaller; undefined (no bound) where the backend has no
 * `diskQuota`.
 */
export function defaultDiskMb(backend: DiskQuotaHolder): number | undefined {
  const quota = backend.capabilities.diskQuota;
  return quota ? Math.min(DEFAULT_DISK_MB, quota.storageMb) : undefined;
}

/** `{ disk_mb }` of a pool instance's spec where the backend bounds disks, else nothing. */
export function defaultDisk(backend: DiskQuotaHolder): { disk_mb?: number } {
  const diskMb = defaultDiskMb(backend);
  return diskMb === undefined ? {} : { disk_mb: diskMb };
}
