import { lchown, lstat } from 'node:fs/promises';
import type Docker from 'dockerode';
import { conflict, notFound } from '../../errors.js';
import type { VolumeInfo, VolumeMount, VolumesCapability } from '../backend.js';
import { dockerStatus, isNotFound } from './docker-errors.js';
import type { ExecRunner } from './docker-files.js';
import { dockerVolumeName, LABEL, type UserIds } from './container-spec.js';

/** The label that names a volume as the service knows it. */
const VOLUME_LABEL = 'sandboxd.volume';
/**
 * The label that keeps when the volume was made: the engine's `CreatedAt` of a `local` volume
 * is its directory's modification time, which moves with every file made at its top.
 */
const CREATED_LABEL = 'sandboxd.created_at';

/**
 * Named volumes as Docker named volumes (the `local` driver), labelled as this service's.
 * Containers mount them (`createOptions`); removing a container leaves them. A claim cannot add
 * mounts to a running container, so a sandbox with volumes is always created fresh.
 */
export class DockerVolumes implements VolumesCapability {
  readonly mountsOnClaim = false;

  constructor(
    private readonly docker: Docker,
    private readonly instanceId: string,
  ) {}

  async createVolume(name: string): Promise<VolumeInfo> {
    await this.docker.createVolume({
      Name: dockerVolumeName(this.instanceId, name),
      Labels: { [LABEL.managed]: 'true', [LABEL.instance]: this.instanceId, [VOLUME_LABEL]: name, [CREATED_LABEL]: new Date().toISOString() },
    });
    const info = await this.inspectVolume(name);
    if (!info) throw notFound(`volume '${name}' vanished as it was made`);
    return info;
  }

  async listVolumes(): Promise<VolumeInfo[]> {
    const answer = await this.docker.listVolumes({ filters: { label: [`${LABEL.managed}=true`, `${LABEL.instance}=${this.instanceId}`] } });
    return (answer.Volumes ?? []).filter((volume) => volume.Labels?.[VOLUME_LABEL]).map((volume) => infoOf(volume));
  }

  async inspectVolume(name: string): Promise<VolumeInfo | null> {
    try {
      const volume = (await this.docker.getVolume(dockerVolumeName(this.instanceId, name)).inspect()) as Docker.VolumeInspectInfo;
      return volume.Labels?.[LABEL.instance] === this.instanceId ? infoOf(volume) : null;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  /**
   * Gives the root directory of each writable volume that root owns (a new volume) to the
   * sandbox's default user, on the host, before the container starts: this works under every
   * profile (the restrictive one holds no CAP_CHOWN inside). The directory is the engine's own
   * (`Mountpoint`), changed with lchown and only while it is a directory root owns. Returns the
   * mounts it could not do (a server that is not root), for claimVolumeRoots.
   */
  async ownRoots(mounts: readonly VolumeMount[], owner: UserIds): Promise<VolumeMount[]> {
    if (owner.uid === 0) return [];
    const left: VolumeMount[] = [];
    for (const mount of mounts.filter((m) => !m.read_only)) {
      try {
        const volume = (await this.docker.getVolume(dockerVolumeName(this.instanceId, mount.name)).inspect()) as Docker.VolumeInspectInfo;
        const root = await lstat(volume.Mountpoint);
        if (root.isDirectory() && root.uid === 0) await lchown(volume.Mountpoint, owner.uid, owner.gid);
      } catch {
        left.push(mount);
      }
    }
    return left;
  }

  async removeVolume(name: string): Promise<void> {
    if (!(await this.inspectVolume(name))) throw notFound(`volume '${name}' not found`);
    await this.docker
      .getVolume(dockerVolumeName(this.instanceId, name))
      .remove()
      .catch((err: unknown) => {
        if (dockerStatus(err) === 409) throw conflict(`volume '${name}' is in use by a container`);
        if (!isNotFound(err)) throw err;
      });
  }
}

/** A volume as the service shows it; one made before the creation label has the engine's time. */
function infoOf(volume: Docker.VolumeInspectInfo & { CreatedAt?: string }): VolumeInfo {
  const stamp = volume.Labels?.[CREATED_LABEL] ?? volume.CreatedAt;
  const created = stamp ? new Date(stamp) : new Date();
  return { name: volume.Labels?.[VOLUME_LABEL] ?? volume.Name, created_at: created.toISOString() };
}

/**
 * Gives the root directory of each writable volume that root owns (a new volume, mounted where
 * the image has no directory) to the sandbox's default user, from inside the running sandbox:
 * for the mounts `DockerVolumes.ownRoots` could not do on the host. Best effort: where root
 * holds no CAP_CHOWN (the restrictive profile) the directory stays root's, and what `failed`
 * reports is logged by the caller.
 */
export async function claimVolumeRoots(run: ExecRunner, mounts: readonly VolumeMount[], owner: UserIds): Promise<string | undefined> {
  const paths = mounts.filter((mount) => !mount.read_only).map((mount) => mount.path);
  if (paths.length === 0 || owner.uid === 0) return undefined;
  const stderr: Buffer[] = [];
  const script = 'ids=$1; shift; for p; do [ "$(stat -c %u "$p")" = 0 ] && { chown "$ids" "$p" || exit 1; }; done; exit 0';
  const outcome = await run({
    command: ['sh', '-c', script, 'sh', `${owner.uid}:${owner.gid}`, ...paths],
    user: '0',
    timeout_ms: 30_000,
    onFrame: (stream, data) => void (stream === 'stderr' && stderr.push(data)),
  });
  return outcome.exit_code === 0 ? undefined : Buffer.concat(stderr).toString('utf8').trim() || `exit code ${outcome.exit_code}`;
}
