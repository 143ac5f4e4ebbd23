import { posix } from 'node:path';
import { imageReferenceProblem } from '../../domain/image-reference.js';
import { badRequest, conflict, notFound, ServiceError } from '../../errors.js';
import { CATALOG } from '../../images/catalog.js';
import { DEPLOYMENT_LABEL, legacyUserImageTag, USER_IMAGE_LABEL, userImageTag } from '../../images/deployment-names.js';
import { baseImages } from '../../images/dockerfile.js';
import { readTar, tarArchive, type TarEntry, type TarRead } from '../../images/tar-archive.js';
import type { BuildImageInput, ImageView } from '../../schemas/image-schemas.js';
import { requireCapability } from '../support/capabilities.js';
import type { ServiceContext } from '../context.js';

/** The most a build context (the tar the engine receives) may hold. */
export const MAX_CONTEXT_BYTES = 64 * 1024 * 1024;

/** The Dockerfile's entry in a context made of `files`, or added to a given one. */
const DOCKERFILE = 'Dockerfile';
const ADDED_DOCKERFILE = '.sandboxd.Dockerfile';

/** A checked build: its context as the engine gets it. */
export interface PreparedBuild {
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
  constructor(private readonly ctx: Pick<ServiceContext, 'backend' | 'repos' | 'pool' | 'runPool' | 'store' | 'logger'>) {}

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
    const { context, dockerfile, dockerfileText } = await this.context(input);
    for (const image of baseImages(dockerfileText)) {
      if (image.includes('$')) throw badRequest(`FROM ${image}: name the image itself: builds pull nothing, so a build argument in FROM cannot be checked`);
      const problem = imageReferenceProblem(image);
      if (problem) throw badRequest(`FROM ${image}: ${problem}`);
      if (!(await builds.inspect(image))) {
        throw badRequest(`FROM ${image}: no such image on this engine, and builds pull nothing: build FROM a local image (${CATALOG.map((e) => e.tag).join(', ')}, or one built here)`);
      }
    }
    return { name: input.name, tag: this.tagOf(input.name), context, dockerfile };
  }

  /** Builds a prepared image as `sandboxd-user/<deployment id>/<name>:latest`; each log chunk goes to `onLog`. */
  async build(prepared: PreparedBuild, onLog: (text: string) => void = () => undefined, signal?: AbortSignal) {
    const builds = requireCapability(this.ctx.backend, 'imageBuild');
    const { name, tag, context, dockerfile } = prepared;
    const built = await builds.build({ tag, context, dockerfile, labels: { [USER_IMAGE_LABEL]: name, [DEPLOYMENT_LABEL]: this.ctx.store.deploymentId }, ...(signal ? { signal } : {}) }, onLog);
    return { name, tag, id: built.id, size_bytes: built.sizeBytes };
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

  /** DELETE /images/{name}: 409 while a sandbox uses it; the pools' instances of it go first. */
  async remove(name: string): Promise<{ deleted: true; name: string; tag: string }> {
    const builds = requireCapability(this.ctx.backend, 'imageBuild');
    const tag = this.tagOf(name);
    if (!(await builds.inspect(tag))) throw notFound(`image '${name}' not found (no ${tag})`, { hint: { action: 'list_images' } });
    const users = (await this.ctx.repos.sandboxes.all()).filter((sandbox) => sandbox.image === tag).map((sandbox) => sandbox.name);
    if (users.length > 0) throw conflict(`image '${name}' is used by sandbox${users.length > 1 ? 'es' : ''} ${users.join(', ')}: delete ${users.length > 1 ? 'them' : 'it'} first`);
    await Promise.all([this.ctx.pool.forgetImage(tag), this.ctx.runPool.forgetImage(tag)]);
    await builds.remove(tag);
    return { deleted: true, name, tag };
  }

  /**
   * At the first start of a data directory made before deployment ids: its built images were
   * tagged `sandboxd-user/<name>:latest`, outside any deployment, so they become this
   * deployment's by a second tag in its repository (the old tag stays: sandboxes and settings
   * that name it keep working). Done once (meta `adopt_built_images`, set by migration 0018).
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

  /** The tar the engine gets: `context` (if any) with the Dockerfile and `files` added; 413 past the limit. */
  private async context(input: BuildImageInput): Promise<{ context: Buffer; dockerfile: string; dockerfileText: string }> {
    const given = input.context === undefined ? undefined : decodeBase64(input.context, 'context');
    if (!given && input.dockerfile === undefined) throw badRequest('dockerfile: required (or a context holding a Dockerfile)');
    const entries: Extract<TarEntry, { type: 'file'; content: Buffer }>[] = Object.entries(input.files ?? {}).map(([path, content]) => ({
      type: 'file',
      path: contextPath(path),
      mode: 0o644,
      content: decodeBase64(content, `files['${path}']`),
    }));
    const dockerfile = given ? (input.dockerfile === undefined ? DOCKERFILE : ADDED_DOCKERFILE) : DOCKERFILE;
    if (input.dockerfile !== undefined) entries.push({ type: 'file', path: dockerfile, mode: 0o644, content: Buffer.from(input.dockerfile) });
    const size = (given?.length ?? 0) + entries.reduce((sum, e) => sum + (e.type === 'file' ? e.content.length + 1024 : 512), 1024);
    if (size > MAX_CONTEXT_BYTES) throw new ServiceError('PAYLOAD_TOO_LARGE', `the build context is ${size} bytes, over the limit of ${MAX_CONTEXT_BYTES} (64 MiB)`);
    if (!given) return { context: await tarArchive(entries), dockerfile, dockerfileText: input.dockerfile ?? '' };
    let listing: TarRead[];
    try {
      listing = await readTar(given);
    } catch (err) {
      throw badRequest(`context: ${(err as Error).message}`);
    }
    const inContext = listing.find((entry) => entry.header.type === 'file' && posix.normalize(entry.header.name) === DOCKERFILE);
    const dockerfileText = input.dockerfile ?? inContext?.content.toString('utf8');
    if (dockerfileText === undefined) throw badRequest('dockerfile: required: the context holds no Dockerfile');
    // The given entries as they were, then the files and the Dockerfile added to them.
    return { context: await tarArchive([...listing, ...entries]), dockerfile, dockerfileText };
  }
}
