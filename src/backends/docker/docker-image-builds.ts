import type Docker from 'dockerode';
import { Readable } from 'node:stream';
import { badRequest, conflict } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type { BuiltImage, ImageBuildCapability, ImageBuildRequest } from '../backend.js';
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

  read(text: string): void {
    const lines = (this.line + text).split('\n');
    this.line = lines.pop() ?? '';
    for (const line of lines) {
      if (/^Step \d+\/\d+ : /.test(line)) this.reused = /^Step \d+\/\d+ : FROM /i.test(line);
      else if (line.trim() === '---> Using cache') this.reused = true;
      const made = /^ ---> ([0-9a-f]{12,64})\s*$/.exec(line)?.[1];
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

  async build({ tag, context, dockerfile, labels, signal }: ImageBuildRequest, onLog: (text: string) => void): Promise<BuiltImage> {
    const previous = await this.inspect(tag);
    const made = new MadeImages();
    let log = '';
    const record = (text: string) => {
      log = (log + text).slice(-MAX_LOG_CHARS);
      made.read(text);
      onLog(text);
    };
    let failure: string | undefined;
    const deadline = AbortSignal.timeout(BUILD_TIMEOUT_MS);
    const stop = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const stopped = () => (deadline.aborted ? `the build ran past ${BUILD_TIMEOUT_MS / 60_000} minutes` : 'the build was cancelled');
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
    const built = failure === undefined ? await this.inspect(tag) : undefined;
    if (!built) {
      await this.removeAll(made.ids.reverse());
      throw badRequest(`the image build failed: ${failure ?? 'the engine reported no image'}`, { details: { log } });
    }
    // A rebuild under the same tag leaves the old image untagged: it goes too.
    if (previous && previous.id !== built.id) await this.removeAll([previous.id]);
    return built;
  }

  async inspect(reference: string): Promise<BuiltImage | undefined> {
    try {
      const info = await this.docker.getImage(reference).inspect();
      return { tag: reference, id: info.Id, sizeBytes: info.Size, createdAt: new Date(info.Created).toISOString() };
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
