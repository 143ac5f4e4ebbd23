import { v7 as uuidv7 } from 'uuid';
import { posix } from 'node:path';
import type { ConfigSection } from '../../config/config-schema.js';
import { imageReferenceProblem } from '../../domain/image-reference.js';
import { badRequest, conflict, isServiceError, notFound, ServiceError } from '../../errors.js';
import { CATALOG } from '../../images/catalog.js';
import { BUILD_LABEL } from '../../backends/backend.js';
import { DockerfileError, dockerfileImages, labelStages, triggerProblem } from '../../images/dockerfile.js';
import { DEPLOYMENT_LABEL, legacyUserImageTag, USER_IMAGE_LABEL, userImageTag } from '../../images/deployment-names.js';
import { readTar, tarArchive, type TarEntry, type TarRead } from '../../images/tar-archive.js';
import type { BuildImageInput, ImageView } from '../../schemas/image-schemas.js';
import { requireCapability } from '../support/capabilities.js';
import { isoNow } from '../support/clock.js';
import type { ServiceContext } from '../context.js';
import { ImageBuildRepository, type ImageBuildRow } from './image-build-repository.js';

/** The most a build context (the tar the engine receives) may hold. */
export const MAX_CONTEXT_BYTES = 64 * 1024 * 1024;

/** The Dockerfile's entry in a context made of `files`, or added to a given one. */
const DOCKERFILE = 'Dockerfile';
const ADDED_DOCKERFILE = '.sandboxd.Dockerfile';

const MIB = 1024 * 1024;

/** A checked build: its context as the engine gets it, and its slot among the builds running. */
export interface PreparedBuild {
  /** The build's id: its record's, and the `sandboxd.build` label of what it makes on the engine. */
  buildId: string;
  name: string;
  tag: string;
  context: Buffer;
  /** The Dockerfile's path in the context. */
  dockerfile: string;
}

/** A relative path of the context, or a 400 naming the field. */
function contextPath(path: string): string {
  const normal = posix.normalize(path);
  if (path === '' || posix.isAbsolute(path) || normal === '.' || normal.startsWith('../') || normal === '..') {
    throw badRequest(`files['${path}']: must be a relative path inside the build context`);
  }
  return normal;
}

function decodeBase64(value: string, field: string): Buffer {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value.replace(/\s+/g, ''))) throw badRequest(`${field}: must be base64`);
  return Buffer.from(value, 'base64');
}

/**
 * Images built from a Dockerfile by the backend's engine (offline: FROM images present on the
 * engine, no network in steps), listed beside the catalog, removed when no sandbox uses them.
 */
export class ImageService {
  private readonly records: ImageBuildRepository;
  /** Builds admitted (prepared) and not yet ended: at most `buildConcurrency`. */
  private running = 0;

  constructor(private readonly ctx: Pick<ServiceContext, 'backend' | 'repos' | 'pool' | 'runPool' | 'store' | 'clock' | 'logger' | 'departures'> & { config: ConfigSection<'images'> }) {
    this.records = new ImageBuildRepository(ctx.store.sql);
  }

  /** The tag of this deployment's built image `name`. */
  private tagOf(name: string): string {
    return userImageTag(this.ctx.store.deploymentId, name);
  }

  /**
   * Checks a POST /images body and makes its build context: a 400 for a bad field or a FROM
   * image the engine lacks, 413 for a context over the limit; nothing is built yet.
   */
  async prepare(input: BuildImageInput): Promise<PreparedBuild> {
    const builds = requireCapability(this.ctx.backend, 'imageBuild');
    // UUIDv7: ids sort as the builds started (GET /images/builds, newest first, on both engines).
    const buildId = uuidv7();
    const { context, dockerfile, dockerfileText } = await this.context(input, (text) => labelStages(text, { [BUILD_LABEL]: buildId }));
    let images;
    try {
      images = dockerfileImages(dockerfileText);
    } catch (err) {
      if (err instanceof DockerfileError) throw badRequest(`dockerfile: ${err.message}`);
      throw err;
    }
    for (const { line, instruction, image } of images) {
      const problem = imageReferenceProblem(image);
      if (problem) throw badRequest(`dockerfile: line ${line}: ${instruction}: ${problem}`);
      const found = await builds.inspect(image);
      if (!found) {
        throw badRequest(`dockerfile: line ${line}: ${instruction}: no such image on this engine, and builds pull nothing: use a local image (${CATALOG.map((e) => e.tag).join(', ')}, or one built here) or an earlier stage`);
      }
      // Its ONBUILD triggers run in this build: they may fetch no more than the Dockerfile may.
      for (const trigger of found.onBuild ?? []) {
        const why = triggerProblem(trigger);
        if (why) throw badRequest(`dockerfile: line ${line}: ${instruction}: the image's ONBUILD ${trigger}: ${why}`);
      }
    }
    // The slot is taken last, with no await after it: a build refused here leaves none taken.
    const most = this.ctx.config.buildConcurrency;
    if (this.running >= most) {
      throw new ServiceError('BUSY', `${this.running} image builds are running, the most at once (--build-concurrency, [images].build_concurrency = ${most}): try again when one has ended`);
    }
    this.running += 1;
    return { buildId, name: input.name, tag: this.tagOf(input.name), context, dockerfile };
  }

  /**
   * Builds a prepared image as `sandboxd-user/<deployment id>/<name>:latest`; each log chunk goes to `onLog`. The
   * build is recorded before the engine starts it and settled when it ends (GET /images/builds).
   */
  async build(prepared: PreparedBuild, onLog: (text: string) => void = () => undefined, signal?: AbortSignal) {
    const { buildId, name, tag, context, dockerfile } = prepared;
    const { buildPidsLimit, buildCpuShares, buildStepDiskMb, buildDiskMb } = this.ctx.config;
    try {
      const builds = requireCapability(this.ctx.backend, 'imageBuild');
      await this.records.start({ id: buildId, name, started_at: isoNow(this.ctx.clock) });
      try {
        const built = await builds.build(
          {
            buildId,
            limits: { pids: buildPidsLimit, cpuShares: buildCpuShares, stepDiskBytes: buildStepDiskMb * MIB, diskBytes: buildDiskMb * MIB },
            tag,
            context,
            dockerfile,
            labels: { [USER_IMAGE_LABEL]: name, [DEPLOYMENT_LABEL]: this.ctx.store.deploymentId },
            ...(signal ? { signal } : {}),
          },
          onLog,
        );
        await this.records.finish(buildId, { status: 'succeeded', imageId: built.id, at: isoNow(this.ctx.clock) });
        return { name, tag, id: built.id, size_bytes: built.sizeBytes };
      } catch (err) {
        const error = isServiceError(err) ? err.message : 'internal error';
        await this.records.finish(buildId, { status: 'failed', error, at: isoNow(this.ctx.clock) });
        throw err;
      }
    } finally {
      this.running -= 1;
    }
  }

  /** GET /images/builds: the recorded builds, newest first. */
  builds(): Promise<ImageBuildRow[]> {
    return this.records.list();
  }

  /**
   * At start: builds the last process was cut in (still `running`) are failed, and what they
   * left on the engine (containers, untagged images, labelled with their id) is removed.
   */
  async recover(): Promise<void> {
    const builds = this.ctx.backend.capabilities.imageBuild;
    for (const row of await this.records.running()) {
      const left = builds ? await builds.sweep(row.id) : { containers: 0, images: 0 };
      await this.records.finish(row.id, { status: 'failed', error: 'the server stopped during the build', at: isoNow(this.ctx.clock) });
      this.ctx.logger.warn({ build: row.id, image: row.name, ...left }, 'an image build cut by the last stop is failed; what it left is removed');
    }
  }

  /** GET /images: the catalog (present or not), then this deployment's built images, newest first. */
  async list(): Promise<ImageView[]> {
    const builds = this.ctx.backend.capabilities.imageBuild;
    const catalog = await Promise.all(
      CATALOG.map(async (entry): Promise<ImageView> => {
        const info = await builds?.inspect(entry.tag);
        return { name: entry.name, tag: entry.tag, kind: 'catalog', present: info !== undefined, id: info?.id ?? null, size_bytes: info?.sizeBytes ?? null, created_at: info?.createdAt ?? null, description: entry.description };
      }),
    );
    const built = (await builds?.listLabelled(USER_IMAGE_LABEL)) ?? [];
    return [
      ...catalog,
      ...built
        .flatMap((image): ImageView[] => {
          const name = image.labels[USER_IMAGE_LABEL] ?? '';
          return image.tag !== this.tagOf(name) ? [] : [{ name, tag: image.tag, kind: 'built', present: true, id: image.id, size_bytes: image.sizeBytes, created_at: image.createdAt, description: null }];
        }),
    ];
  }

  /**
   * DELETE /images/{name}: 409 while a sandbox uses it; the pools' instances of it go first, and
   * the containers of deleted sandboxes that the engine may still be removing.
   */
  async remove(name: string): Promise<{ deleted: true; name: string; tag: string }> {
    const builds = requireCapability(this.ctx.backend, 'imageBuild');
    const tag = this.tagOf(name);
    if (!(await builds.inspect(tag))) throw notFound(`image '${name}' not found (no ${tag})`, { hint: { action: 'list_images' } });
    const users = (await this.ctx.repos.sandboxes.all()).filter((sandbox) => sandbox.image === tag).map((sandbox) => sandbox.name);
    if (users.length > 0) throw conflict(`image '${name}' is used by sandbox${users.length > 1 ? 'es' : ''} ${users.join(', ')}: delete ${users.length > 1 ? 'them' : 'it'} first`);
    await Promise.all([this.ctx.pool.forgetImage(tag), this.ctx.runPool.forgetImage(tag), this.ctx.departures.settled((sandbox) => sandbox.image === tag)]);
    await builds.remove(tag);
    return { deleted: true, name, tag };
  }

  /**
   * At the first start of a data directory made before deployment ids: its built images were
   * tagged `sandboxd-user/<name>:latest`, outside any deployment, so they become this
   * deployment's by a second tag in its repository (the old tag stays: sandboxes and settings
   * that name it keep working). Done once (meta `adopt_built_images`, set by migration 0022).
   */
  async adoptLegacy(): Promise<void> {
    const db = this.ctx.store.db;
    const pending = await db.selectFrom('meta').select('value').where('key', '=', 'adopt_built_images').executeTakeFirst();
    const builds = this.ctx.backend.capabilities.imageBuild;
    if (!pending || !builds) return;
    for (const image of await builds.listLabelled(USER_IMAGE_LABEL)) {
      const name = image.labels[USER_IMAGE_LABEL] ?? '';
      if (image.tag !== legacyUserImageTag(name) || (await builds.inspect(this.tagOf(name)))) continue;
      await builds.tag(image.id, this.tagOf(name));
      this.ctx.logger.info({ image: image.tag, tag: this.tagOf(name) }, 'built image from before deployment ids adopted');
    }
    await db.deleteFrom('meta').where('key', '=', 'adopt_built_images').execute();
  }

  /**
   * The tar the engine gets: `context` (if any) with `files` and the Dockerfile (as `label`
   * makes it) added; 413 past the limit. `dockerfileText` is the Dockerfile as given.
   */
  private async context(input: BuildImageInput, label: (text: string) => string): Promise<{ context: Buffer; dockerfile: string; dockerfileText: string }> {
    const given = input.context === undefined ? undefined : decodeBase64(input.context, 'context');
    if (!given && input.dockerfile === undefined) throw badRequest('dockerfile: required (or a context holding a Dockerfile)');
    const entries: Extract<TarEntry, { type: 'file'; content: Buffer }>[] = Object.entries(input.files ?? {}).map(([path, content]) => ({
      type: 'file',
      path: contextPath(path),
      mode: 0o644,
      content: decodeBase64(content, `files['${path}']`),
    }));
    // A given context keeps its own entries as they were: the Dockerfile built goes beside them.
    const dockerfile = given ? ADDED_DOCKERFILE : DOCKERFILE;
    const size = (given?.length ?? 0) + Buffer.byteLength(input.dockerfile ?? '') + entries.reduce((sum, e) => sum + e.content.length + 1024, 2048);
    if (size > MAX_CONTEXT_BYTES) throw new ServiceError('PAYLOAD_TOO_LARGE', `the build context is ${size} bytes, over the limit of ${MAX_CONTEXT_BYTES} (64 MiB)`);
    let listing: TarRead[] = [];
    if (given) {
      try {
        listing = await readTar(given);
      } catch (err) {
        throw badRequest(`context: ${(err as Error).message}`);
      }
    }
    const inContext = listing.find((entry) => entry.header.type === 'file' && posix.normalize(entry.header.name) === DOCKERFILE);
    const dockerfileText = input.dockerfile ?? inContext?.content.toString('utf8');
    if (dockerfileText === undefined) throw badRequest('dockerfile: required: the context holds no Dockerfile');
    entries.push({ type: 'file', path: dockerfile, mode: 0o644, content: Buffer.from(label(dockerfileText)) });
    // The given entries as they were, then the files and the Dockerfile added to them.
    return { context: await tarArchive([...listing, ...entries]), dockerfile, dockerfileText };
  }
}
