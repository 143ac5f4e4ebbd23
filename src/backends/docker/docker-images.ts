import type Docker from 'dockerode';
import { ServiceError, badRequest } from '../../errors.js';
import { imageReferenceProblem } from '../../domain/image-reference.js';
import { firstTarFile } from '../../images/tar-archive.js';
import type { Logger } from '../../telemetry/logger.js';
import { LABEL, type UserIds } from './container-spec.js';
import { dockerMessage, isNotFound } from './docker-errors.js';

/** A registry that does not answer within this is treated as absent (air-gapped hosts). */
const PULL_TIMEOUT_MS = 15_000;

const ROOT: UserIds = { uid: 0, gid: 0 };

/**
 * Images as the Docker backend needs them: present locally (pulled when possible) and with
 * their default user resolved to numeric ids, which tmpfs mounts and archives need.
 */
export class DockerImages {
  /** Default user per image id; an image id never changes content, so this never goes stale. */
  private readonly users = new Map<string, Promise<UserIds>>();

  constructor(
    private readonly docker: Docker,
    private readonly instanceId: string,
    private readonly logger: Logger,
    private readonly hint?: (image: string) => string,
  ) {}

  /** The image's inspect data, pulling it first if it is missing; IMAGE_UNAVAILABLE otherwise. */
  async ensure(image: string): Promise<Docker.ImageInspectInfo> {
    // Also for images that come from settings and snapshots: nothing malformed reaches an API path.
    const problem = imageReferenceProblem(image);
    if (problem) throw badRequest(`image: ${problem}`);
    try {
      return await this.docker.getImage(image).inspect();
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    let reason = await this.pull(image);
    if (reason === undefined) {
      try {
        return await this.docker.getImage(image).inspect();
      } catch (err) {
        if (!isNotFound(err)) throw err;
        reason = 'the pull ended without the image';
      }
    }
    const hint = this.hint?.(image);
    throw new ServiceError(
      'IMAGE_UNAVAILABLE',
      `image '${image}' is not available locally and could not be pulled (${reason})${hint ? `; ${hint}` : ''}`,
    );
  }

  /** Numeric uid/gid of the image's default user (its Config.User, else root). */
  defaultUser(info: Docker.ImageInspectInfo): Promise<UserIds> {
    let user = this.users.get(info.Id);
    if (!user) {
      user = this.resolveUser(info);
      this.users.set(info.Id, user);
      user.catch(() => this.users.delete(info.Id));
    }
    return user;
  }

  /** Pulls an image; resolves with the reason it failed, or undefined on success. */
  private async pull(image: string): Promise<string | undefined> {
    this.logger.info({ image }, 'pulling image');
    const deadline = AbortSignal.timeout(PULL_TIMEOUT_MS);
    const timedOut = `no registry answered within ${PULL_TIMEOUT_MS / 1000} s`;
    try {
      const stream = await this.docker.pull(image, { abortSignal: deadline });
      const events = await new Promise<Array<{ error?: string }>>((resolve, reject) =>
        this.docker.modem.followProgress(stream, (err: Error | null, output: Array<{ error?: string }>) =>
          err ? reject(err) : resolve(output),
        ),
      );
      // An abort mid-download ends the progress stream as if it had finished.
      return deadline.aborted ? timedOut : events.find((event) => event.error)?.error;
    } catch (err) {
      return deadline.aborted ? timedOut : dockerMessage(err);
    }
  }

  private async resolveUser(info: Docker.ImageInspectInfo): Promise<UserIds> {
    const [user = '', group] = (info.Config.User ?? '').split(':');
    // Root is uid 0 in every image, also one without an /etc/passwd (as the agent takes it).
    if (user === '' || (user === 'root' && group === undefined)) return ROOT;
    const uid = numericId(user);
    const gid = numericId(group);
    if (uid !== undefined && gid !== undefined) return { uid, gid };
    const image = info.RepoTags?.[0] ?? info.Id;
    const [passwd, groups] = await this.readFromImage(info.Id, ['/etc/passwd', '/etc/group']);
    // passwd lines are name:x:uid:gid:..., group lines name:x:gid:...
    const account = findEntry(passwd, (fields) => (uid === undefined ? fields[0] === user : fields[2] === user));
    const resolvedUid = uid ?? numericId(account?.[2]);
    if (resolvedUid === undefined) throw badRequest(`image '${image}': its default user '${user}' is not in /etc/passwd`);
    // As Docker does: an explicit group wins, then the user's primary group, else gid 0.
    const resolvedGid =
      group === undefined
        ? (numericId(account?.[3]) ?? 0)
        : (gid ?? numericId(findEntry(groups, (fields) => fields[0] === group)?.[2]));
    if (resolvedGid === undefined) throw badRequest(`image '${image}': its default group '${group}' is not in /etc/group`);
    return { uid: resolvedUid, gid: resolvedGid };
  }

  /**
   * Reads small files out of an image through a container that is created but never started
   * (nothing runs, so no shell is needed in the image). It carries our labels, so that if the
   * server dies before removing it, reconciliation reaps it like any pool leftover.
   */
  private async readFromImage(imageId: string, paths: string[]): Promise<Array<string | undefined>> {
    const probe = await this.docker.createContainer({
      Image: imageId,
      Entrypoint: [],
      Cmd: ['true'],
      Labels: {
        [LABEL.managed]: 'true',
        [LABEL.instance]: this.instanceId,
        [LABEL.role]: 'pool',
        [LABEL.name]: 'image-probe',
      },
      HostConfig: { NetworkMode: 'none' },
    });
    try {
      return await Promise.all(
        paths.map(async (path) => {
          try {
            const archive = await probe.getArchive({ path });
            return (await firstTarFile(archive))?.toString('utf8');
          } catch (err) {
            if (isNotFound(err)) return undefined;
            throw err;
          }
        }),
      );
    } finally {
      await probe.remove({ force: true, v: true }).catch((err: unknown) => {
        this.logger.warn({ err, container: probe.id }, 'could not remove an image probe container');
      });
    }
  }
}

const numericId = (value: string | undefined): number | undefined =>
  value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;

/** The fields of the first line of a colon-separated file (passwd, group) that `match` accepts. */
const findEntry = (file: string | undefined, match: (fields: string[]) => boolean): string[] | undefined =>
  file
    ?.split('\n')
    .map((line) => line.split(':'))
    .find(match);
