import { createReadStream, createWriteStream, readdirSync, rmSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { ServiceError, UnsupportedError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type { SavedImageKind } from '../backend.js';
import { LABEL, WORKSPACE } from './container-spec.js';
import { dockerStatus, isNotFound } from './docker-errors.js';
import type { ExecRunner } from './docker-files.js';

/** Labels of the images this backend commits. */
export const IMAGE_LABEL = {
  /** snapshot | archive (`sandboxd.image` names the catalog images, see images/image-recipe.ts). */
  kind: 'sandboxd.saved',
  /** Set when the image carries a copy of a tmpfs /workspace at this path. */
  workspace: 'sandboxd.workspace-archive',
} as const;

/** Where an image keeps the contents of a tmpfs /workspace (as a tar file; see `commit`). */
export const WORKSPACE_ARCHIVE = '/.sandboxd-workspace.tar';
const ARCHIVE_TIMEOUT_MS = 600_000;

/**
 * Snapshot and archive images of the Docker backend. `docker commit` keeps the container's
 * writable layer but not its tmpfs mounts, and the restrictive profile's /workspace is one. So,
 * for a running container with a tmpfs /workspace, the workspace is first read out as a tar
 * into a host temporary file, so that its size does not weigh on the server's memory (through
 * exec: the engine's archive API cannot see into a tmpfs, least of all under gVisor),
 * and the committed image gets one more layer holding that tar at WORKSPACE_ARCHIVE, written
 * through a helper container that is created but never started. A sandbox created from the
 * image unpacks it into its fresh tmpfs (`restoreWorkspace`).
 */
export class DockerSnapshots {
  /** Host temporary directories of this instance's snapshots: `<tmpdir>/<prefix>XXXXXX`. */
  private readonly scratchPrefix: string;

  constructor(
    private readonly docker: Docker,
    private readonly instanceId: string,
    private readonly logger: Logger,
  ) {
    this.scratchPrefix = `sandboxd-workspace-${instanceId}-`;
    // Scratch files a killed predecessor left. Only one process holds an instance id (the
    // data-directory lock), so whatever carries this id's prefix is nobody's any more.
    for (const entry of readdirSync(tmpdir())) {
      if (entry.startsWith(this.scratchPrefix)) rmSync(join(tmpdir(), entry), { recursive: true, force: true });
    }
  }

  /**
   * Commits the container as `tag`; the container is paused while its layer is copied. `run`
   * runs a command in it (to read a tmpfs /workspace).
   */
  async commit(container: Docker.Container, tag: string, kind: SavedImageKind, run: ExecRunner): Promise<void> {
    const info = await container.inspect();
    const { repo, version } = splitTag(tag);
    const changes = [`LABEL ${LABEL.instance}=${this.instanceId}`, `LABEL ${IMAGE_LABEL.kind}=${kind}`];
    // The container runs its agent as root; the image keeps the default user of its own image.
    const user = info.Config.Labels?.[LABEL.user];
    if (user !== undefined) changes.push(`USER ${user || '0'}`);
    const tmpfsWorkspace = info.HostConfig.Tmpfs?.[WORKSPACE] !== undefined;
    if (!tmpfsWorkspace || !info.State.Running) {
      // A stopped container's tmpfs is gone, and so is its workspace: an older copy that the
      // image may have inherited (from a snapshot it was restored from) must not come back.
      const clear = tmpfsWorkspace ? [`LABEL ${IMAGE_LABEL.workspace}=""`] : [];
      await container.commit({ repo, tag: version, pause: true, changes: [...changes, ...clear] });
      return;
    }
    const scratch = await mkdtemp(join(tmpdir(), this.scratchPrefix));
    try {
      const tarFile = join(scratch, 'workspace.tar');
      await this.readWorkspace(run, tarFile);
      await this.commitWithWorkspace(container, tarFile, repo, version, changes);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }

  /** Commits the container, then adds the workspace tar as one more layer through a helper. */
  private async commitWithWorkspace(container: Docker.Container, tarFile: string, repo: string, version: string, changes: string[]): Promise<void> {
    const base = (await container.commit({ pause: true, changes })) as { Id: string };
    const helper = await this.docker.createContainer({
      Image: base.Id,
      Entrypoint: [],
      Cmd: ['true'],
      // The source's uuid label must not follow: the helper is no sandbox.
      Labels: { [LABEL.managed]: 'true', [LABEL.instance]: this.instanceId, [LABEL.role]: 'helper', [LABEL.uuid]: '', [LABEL.name]: 'snapshot-helper' },
      HostConfig: { NetworkMode: 'none' },
    });
    try {
      const { size } = await stat(tarFile);
      await helper.putArchive(Readable.from(singleFileTar(WORKSPACE_ARCHIVE.slice(1), size, createReadStream(tarFile))), { path: '/' });
      await helper.commit({ repo, tag: version, changes: [...changes, `LABEL ${IMAGE_LABEL.workspace}=${WORKSPACE_ARCHIVE}`] });
    } catch (err) {
      await this.removeImage(base.Id);
      throw err;
    } finally {
      await helper.remove({ force: true }).catch((err: unknown) => this.logger.warn({ err, container: helper.id }, 'could not remove a snapshot helper'));
    }
  }

  /** Unpacks the saved workspace of the container's image, if it has one, into its tmpfs. */
  async restoreWorkspace(image: Docker.ImageInspectInfo, run: ExecRunner): Promise<void> {
    if (!image.Config.Labels?.[IMAGE_LABEL.workspace]) return;
    const stderr: Buffer[] = [];
    const outcome = await run({
      command: ['tar', '-x', '--no-same-owner', '-C', WORKSPACE, '-f', WORKSPACE_ARCHIVE],
      timeout_ms: ARCHIVE_TIMEOUT_MS,
      onFrame: (stream, data) => void (stream === 'stderr' && stderr.push(data)),
    });
    if (outcome.exit_code === TAR_MISSING) throw withoutTar();
    if (outcome.exit_code !== 0) {
      throw new ServiceError('INTERNAL', `restoring ${WORKSPACE} failed: ${Buffer.concat(stderr).toString('utf8').trim() || outcome.exit_code}`);
    }
  }

  /**
   * Removes an image by tag or id. A tag still used by a container is untagged (the layers go
   * once the container does, see `removeIfDangling`); an id in use is left alone.
   */
  async removeImage(ref: string): Promise<void> {
    const image = this.docker.getImage(ref);
    try {
      await image.remove();
    } catch (err) {
      if (isNotFound(err)) return;
      if (dockerStatus(err) !== 409) throw err;
      if (!ref.startsWith('sha256:')) await image.remove({ force: true }).catch(ignoreMissing);
    }
  }

  /** Tags of this instance's snapshot and archive images, and the ids of untagged ones. */
  async list(): Promise<string[]> {
    const rows = await this.docker.listImages({ filters: { label: [`${LABEL.instance}=${this.instanceId}`, IMAGE_LABEL.kind] } });
    return rows.flatMap((row) => {
      const tags = (row.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
      return tags.length > 0 ? tags : [row.Id];
    });
  }

  /** Removes an image of ours that lost its last tag (a deleted snapshot a removed sandbox still used). */
  async removeIfDangling(imageId: string): Promise<void> {
    const info = await this.docker.getImage(imageId).inspect().catch(() => undefined);
    if (!info || (info.RepoTags ?? []).length > 0) return;
    if (info.Config.Labels?.[LABEL.instance] !== this.instanceId || !info.Config.Labels?.[IMAGE_LABEL.kind]) return;
    await this.removeImage(imageId);
  }

  /** Writes the workspace as a tar to `file`, read as the image's default user (who owns it). */
  private async readWorkspace(run: ExecRunner, file: string): Promise<void> {
    const out = createWriteStream(file);
    const stderr: Buffer[] = [];
    const outcome = await run({
      command: ['tar', '-c', '-C', WORKSPACE, '.'],
      env: { LC_ALL: 'C' },
      timeout_ms: ARCHIVE_TIMEOUT_MS,
      onFrame: (stream, data) => void (stream === 'stdout' ? out.write(data) : stderr.push(data)),
    }).finally(() => new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve()))));
    if (outcome.exit_code === TAR_MISSING) throw withoutTar();
    // GNU tar exits 1 when a file changed while it was read: the archive is still whole.
    if (outcome.exit_code !== 0 && outcome.exit_code !== 1) {
      throw new ServiceError('INTERNAL', `reading ${WORKSPACE} failed: ${Buffer.concat(stderr).toString('utf8').trim() || outcome.exit_code}`);
    }
  }
}

/** The exit code of a command that is not in the sandbox (as in a shell). */
const TAR_MISSING = 127;

/** A tmpfs /workspace is copied with the image's own tar (GNU or busybox); some images have none. */
const withoutTar = () => new UnsupportedError('docker', `snapshots of a sandbox with a tmpfs ${WORKSPACE} (restrictive) whose image has no tar`);

const ignoreMissing = (err: unknown): void => {
  if (!isNotFound(err)) throw err;
};

/** `repo:tag` split at the last colon that is not part of a registry port. */
function splitTag(ref: string): { repo: string; version: string } {
  const at = ref.lastIndexOf(':');
  if (at <= ref.lastIndexOf('/')) return { repo: ref, version: 'latest' };
  return { repo: ref.slice(0, at), version: ref.slice(at + 1) };
}

/** A ustar archive holding one regular file (mode 0644, owner root) of `size` bytes from `body`. */
async function* singleFileTar(name: string, size: number, body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const header = Buffer.alloc(512);
  const octal = (value: number, width: number) => value.toString(8).padStart(width - 1, '0') + '\0';
  header.write(name, 0, 100, 'utf8');
  header.write(octal(0o644, 8), 100);
  header.write(octal(0, 8), 108);
  header.write(octal(0, 8), 116);
  header.write(octal(size, 12), 124);
  header.write(octal(Math.floor(Date.now() / 1000), 12), 136);
  header.write(' '.repeat(8), 148);
  header.write('0', 156);
  header.write('ustar\0', 257);
  header.write('00', 263);
  const checksum = header.reduce((sum, byte) => sum + byte, 0);
  header.write(`${checksum.toString(8).padStart(6, '0')}\0 `, 148);
  yield header;
  yield* body;
  yield Buffer.alloc((512 - (size % 512)) % 512);
  yield Buffer.alloc(1024);
}
