import { statfs } from 'node:fs/promises';
import type { DiskQuotaCapability } from '../backend.js';
import { MAX_DISK_MB } from '../../domain/disk.js';

/** What `docker info` says of the engine's storage (the fields read here). */
export interface EngineStorageInfo {
  Driver?: string;
  DriverStatus?: Array<[string, string]> | null;
  DockerRootDir?: string;
}

/**
 * Storage drivers whose `--storage-opt size` bounds a container's writable layer without more
 * conditions: btrfs (a qgroup limit on the container's subvolume; the driver enables quotas
 * itself). overlay2 bounds it only over xfs mounted with pquota, which `docker info` does not
 * show, so it is not claimed (docs/decisions.md, "Disk quota").
 */
const QUOTA_DRIVERS = new Set(['btrfs']);

/**
 * The engine's `diskQuota` capability, or undefined where its storage driver cannot bound a
 * container's writes. The storage's size comes from the data-root's file system when this
 * process can see it (the server runs beside the engine), else MAX_DISK_MB.
 */
export async function diskQuotaOf(info: EngineStorageInfo): Promise<DiskQuotaCapability | undefined> {
  if (!info.Driver || !QUOTA_DRIVERS.has(info.Driver)) return undefined;
  let storageMb = MAX_DISK_MB;
  if (info.DockerRootDir) {
    try {
      const fs = await statfs(info.DockerRootDir);
      storageMb = Math.min(MAX_DISK_MB, Math.floor((fs.blocks * fs.bsize) / 1024 / 1024));
    } catch {
      // Another machine's engine (or no access): its size is not known here.
    }
  }
  return { storageMb };
}

/**
 * MiB a container's writable layer needs beyond what the sandbox may write, for its image. The
 * btrfs driver's limit counts the referenced bytes of the container's subvolume, a snapshot of
 * the image's, so it includes the image's own blocks: those take somewhat more than the image's
 * size says (measured: 5.7% more for sandboxd/base, 6.7% for python, 9.3% for node), hence the
 * margin: a sandbox may write up to about a tenth of its image's size beyond its disk_mb.
 */
export function imageAllowanceMb(imageSizeBytes: number): number {
  return Math.ceil((imageSizeBytes / 1024 / 1024) * 1.12) + 8;
}
