import type Docker from 'dockerode';
import { Readable } from 'node:stream';
import { badRequest, conflict } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import { BUILD_LABEL, type BuiltImage, type ImageBuildCapability, type ImageBuildRequest } from '../backend.js';
import { BuildCgroup, BuildWatch, removeBuildCgroups } from './docker-build-limits.js';
import { dockerMessage, dockerStatus, isNotFound } from './docker-errors.js';

/** A build still running after this is stopped (and what it made removed). */
export const BUILD_TIMEOUT_MS = 30 * 60_000;
/** Memory of a build step's container (no swap beyond it). */
const BUILD_MEMORY_BYTES = 2 * 1024 * 1024 * 1024;

/** A made image still held by the cancelled step's container is tried again this often, this many times. */
const REMOVE_RETRY_MS = 500;
const REMOVE_ATTEMPTS = 40;

/** The build log kept for an error's `details.log`: its last part when longer. */
const MAX_LOG_CHARS = 256 * 1024;

/** One JSON message of the engine's build stream. */
interface BuildMessage {
  stream?: string;
  error?: string;
  aux?: { ID?: string };
}

/**
 * Reads the classic builder's log for the images a build made: a step prints ` ---> <id>` for
 * the image it leaves, also for the base image of `FROM` and for a step taken from the cache;
 * only the others are the build's own, and a failed build removes exactly those.
 */
class MadeImages {
  readonly ids: string[] = [];
  private reused = false;
  private line = '';

  constructor(private readonly watch: BuildWatch) {}

  read(text: string): void {
    const lines = (this.line + text).split('\n');
    this.line = lines.pop() ?? '';
    for (const line of lines) {
      if (/^Step \d+\/\d+ : /.test(line)) {
        this.reused = /^Step \d+\/\d+ : FROM /i.test(line);
        this.watch.stepStarted(line.trim());
      } else if (line.trim() === '---> Using cache') this.reused = true;
      const running = /^ ---> Running in ([0-9a-f]{12,64})\s*$/.exec(line)?.[1];
      if (running) this.watch.containerStarted(running);
      const made = /^ ---> ([0-9a-f]{12,64})\s*$/.exec(line)?.[1];
      if (made) this.watch.imageLeft(made, !this.reused);
      if (made && !this.reused) this.ids.push(made);
    }
  }
}

/** Images from a Dockerfile through the engine's build API (the classic builder). */
export class DockerImageBuilds implements ImageBuildCapability {
  constructor(
    private readonly docker: Docker,
    private readonly logger: Logger,
  ) {}

  async build({ buildId, limits, tag, context, dockerfile, labels, signal }: ImageBuildRequest, onLog: (text: string) => void): Promise<BuiltImage> {
    const previous = await this.inspect(tag);
    let log = '';
    const record = (text: string) => {
      log = (log + text).slice(-MAX_LOG_CHARS);
      made.read(text);
      onLog(text);
    };
    let failure: string | undefined;
    const deadline = AbortSignal.timeout(BUILD_TIMEOUT_MS);
    const bounds = new AbortController();
    const stop = AbortSignal.any([...(signal ? [signal] : []), deadline, bounds.signal]);
    const stopped = () => (deadline.aborted ? `the build ran past ${BUILD_TIMEOUT_MS / 60_000} minutes` : 'the build was cancelled');
    const cgroup = await BuildCgroup.open(this.docker, buildId, limits.pids);
    const watch = new BuildWatch(this.docker, limits, cgroup, (message) => {
      failure ??= message;
      onLog(`\nsandboxd: ${message}\n`);
      log = (log + `\nsandboxd: ${message}\n`).slice(-MAX_LOG_CHARS);
      bounds.abort();
    });
    const made = new MadeImages(watch);
    watch.start();
    try {
      const stream = await this.docker.buildImage(Readable.from([context]), {
        t: tag,
        dockerfile,
        labels,
        // Intermediate containers go whether the build succeeds or not; no network in steps.
        rm: true,
        forcerm: true,
        networkmode: 'none',
        memory: BUILD_MEMORY_BYTES,
        memswap: BUILD_MEMORY_BYTES,
        cpushares: limits.cpuShares,
        ...(cgroup ? { cgroupparent: cgroup.parent } : {}),
        abortSignal: stop,
      });
      await new Promise<void>((resolve, reject) => {
        this.docker.modem.followProgress(
          stream,
          (err: Error | null) => (err ? reject(err) : resolve()),
          (message: BuildMessage) => {
            if (message.stream) record(message.stream);
            if (message.error) {
              failure ??= message.error.trim();
              record(`${message.error.trim()}\n`);
            }
          },
        );
      });
      if (stop.aborted) failure ??= stopped();
    } catch (err) {
      failure ??= stop.aborted ? stopped() : dockerMessage(err);
    }
    // The last step's layer is measured before the build counts as done.
    await watch.stop();
    const built = failure === undefined ? await this.inspect(tag) : undefined;
    if (!built) {
      await this.removeAll(made.ids.reverse());
      await this.sweep(buildId);
      // A build failed after the engine tagged its image (a bound found past at the end): the tag goes back.
      if (previous && (await this.inspect(tag))?.id !== previous.id) await this.retag(previous.id, tag);
      throw badRequest(`the image build failed: ${failure ?? 'the engine reported no image'}`, { details: { log } });
    }
    await removeBuildCgroups(buildId);
    // A rebuild under the same tag leaves the old image untagged: it goes too.
    if (previous && previous.id !== built.id) await this.removeAll([previous.id]);
    return built;
  }

  async sweep(buildId: string): Promise<{ containers: number; images: number }> {
    const label = JSON.stringify({ label: [`${BUILD_LABEL}=${buildId}`] });
    const containers = await this.docker.listContainers({ all: true, filters: label });
    for (const container of containers) {
      await this.docker
        .getContainer(container.Id)
        .remove({ force: true })
        .catch((err: unknown) => (isNotFound(err) ? undefined : this.logger.warn({ err, container: container.Id }, 'could not remove a container a build left')));
    }
    // Untagged ones only: a tagged image of the build is one that was built (and is used).
    const images = (await this.docker.listImages({ all: true, filters: label })).filter((image) => (image.RepoTags ?? []).every((t) => t === '<none>:<none>'));
    await this.removeAll(images.sort((a, b) => b.Created - a.Created).map((image) => image.Id));
    await removeBuildCgroups(buildId);
    return { containers: containers.length, images: images.length };
  }

  private async retag(id: string, tag: string): Promise<void> {
    const at = tag.lastIndexOf(':');
    await this.docker
      .getImage(id)
      .tag({ repo: tag.slice(0, at), tag: tag.slice(at + 1) })
      .catch((err: unknown) => this.logger.warn({ err, image: id, tag }, 'could not give an image its tag back'));
  }

  async inspect(reference: string): Promise<BuiltImage | undefined> {
    try {
      const info = await this.docker.getImage(reference).inspect();
      const onBuild = info.Config?.OnBuild ?? [];
      return { tag: reference, id: info.Id, sizeBytes: info.Size, createdAt: new Date(info.Created).toISOString(), ...(onBuild.length > 0 ? { onBuild } : {}) };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async listLabelled(label: string): Promise<Array<BuiltImage & { labels: Record<string, string> }>> {
    const images = await this.docker.listImages({ filters: JSON.stringify({ label: [label] }) });
    return images
      .sort((a, b) => b.Created - a.Created)
      .flatMap((image) =>
        (image.RepoTags ?? [])
          .filter((tag) => tag !== '<none>:<none>')
          .map((tag) => ({ tag, id: image.Id, sizeBytes: image.Size, createdAt: new Date(image.Created * 1000).toISOString(), labels: image.Labels ?? {} })),
      );
  }

  async remove(tag: string): Promise<void> {
    try {
      await this.docker.getImage(tag).remove();
    } catch (err) {
      if (isNotFound(err)) return;
      if (dockerStatus(err) === 409) throw conflict(`image ${tag} is still used by a container: ${dockerMessage(err)}`);
      throw err;
    }
  }

  async tag(source: string, tag: string): Promise<void> {
    const at = tag.lastIndexOf(':');
    await this.docker.getImage(source).tag({ repo: tag.slice(0, at), tag: tag.slice(at + 1) });
  }

  /**
   * Removes images by id, newest first, with their untagged parents. After a cancelled build the
   * engine may still be stopping the step's container, which holds its parent image: a conflict
   * is tried again for a while; an image still in use after that stays (and is logged).
   */
  private async removeAll(ids: string[]): Promise<void> {
    for (const id of ids) {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.docker.getImage(id).remove();
          break;
        } catch (err) {
          if (isNotFound(err)) break;
          if (dockerStatus(err) !== 409 || attempt >= REMOVE_ATTEMPTS) {
            this.logger.warn({ err, image: id }, 'could not remove an image a build left');
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, REMOVE_RETRY_MS));
        }
      }
    }
  }
}
