import { readFile, readdir, statfs } from 'node:fs/promises';
import { basename } from 'node:path';
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

/** What the engine's storage can bound, and how its limits count. */
export interface EngineQuota {
  capability: DiskQuotaCapability;
  /**
   * A container's limit counts its image's blocks too. btrfs's full qgroup accounting charges a
   * snapshot with every extent it references, the image's included; simple quotas (squota,
   * Linux 6.7) charge an extent only to the subvolume that wrote it, so a limit is exactly what
   * the container writes. Where the mode cannot be read (another machine's engine), the image is
   * assumed to count: the bound is then looser by the image's size, never tighter.
   */
  countsImage: boolean;
}

/**
 * The engine's quota, or undefined where its storage driver cannot bound a container's writes.
 * The storage's size comes from the data-root's file system when this process can see it (the
 * server runs beside the engine), else MAX_DISK_MB.
 */
export async function diskQuotaOf(info: EngineStorageInfo): Promise<EngineQuota | undefined> {
  if (!info.Driver || !QUOTA_DRIVERS.has(info.Driver)) return undefined;
  let storageMb = MAX_DISK_MB;
  let countsImage = true;
  if (info.DockerRootDir) {
    try {
      const fs = await statfs(info.DockerRootDir);
      storageMb = Math.min(MAX_DISK_MB, Math.floor((fs.blocks * fs.bsize) / 1024 / 1024));
      countsImage = (await btrfsQuotaMode(info.DockerRootDir)) !== 'squota';
    } catch {
      // Another machine's engine (or no access): its size and mode are not known here.
    }
  }
  return { capability: { storageMb }, countsImage };
}

/**
 * The quota mode of the btrfs file system holding `path` as the kernel reports it
 * (`/sys/fs/btrfs/<fsid>/qgroups/mode`: `qgroup`, `squota`), found through the device that
 * /proc/self/mountinfo names for the mount holding it. Undefined when any step does not apply.
 */
export async function btrfsQuotaMode(path: string, sys = '/sys/fs/btrfs', mountinfo = '/proc/self/mountinfo'): Promise<string | undefined> {
  const device = mountDevice(await readFile(mountinfo, 'utf8'), path);
  if (!device) return undefined;
  for (const fsid of await readdir(sys)) {
    const devices = await readdir(`${sys}/${fsid}/devices`).catch(() => [] as string[]);
    if (!devices.includes(basename(device))) continue;
    return (await readFile(`${sys}/${fsid}/qgroups/mode`, 'utf8').catch(() => '')).trim() || undefined;
  }
  return undefined;
}

/** The source device of the btrfs mount that holds `path` (the longest mount point above it). */
export function mountDevice(mountinfo: string, path: string): string | undefined {
  let best: { point: string; source: string } | undefined;
  for (const line of mountinfo.split('\n')) {
    // `id parent major:minor root point options [optional...] - fstype source superoptions`
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const point = left.split(' ')[4]?.replace(/\\040/g, ' ');
    const [fstype, source] = right.split(' ');
    if (!point || fstype !== 'btrfs' || !source) continue;
    const holds = path === point || path.startsWith(point.endsWith('/') ? point : `${point}/`);
    if (holds && (!best || point.length >= best.point.length)) best = { point, source };
  }
  return best?.source;
}

/**
 * MiB a container's writable layer needs beyond what the sandbox may write, for its image, where
 * the limit counts the image's blocks (`countsImage`): those take somewhat more than the image's
 * size says (measured: 5.7% more for sandboxd/base, 6.7% for python, 9.3% for node), hence the
 * margin: a sandbox may then write up to about a tenth of its image's size beyond its disk_mb.
 */
export function imageAllowanceMb(imageSizeBytes: number): number {
  return Math.ceil((imageSizeBytes / 1024 / 1024) * 1.12) + 8;
}
