import Dockerode from 'dockerode';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { ServiceError, notFound } from '../errors.js';
import { CATALOG, catalogEntryFor, type CatalogEntry } from './catalog.js';
import { debianSources } from './debian-mirror.js';
import { CUSTOMIZE_HOOK, importChanges, imageVersion, LABEL_VERSION, mmdebstrapArgs, parentOf, splitTag } from './image-recipe.js';
import { buildLayer } from './image-layer.js';
import { fetchNodeRelease } from './npm-tarballs.js';
import { runMmdebstrap } from './mmdebstrap.js';

/** Options of {@link buildImage}. */
export interface BuildOptions {
  docker?: Dockerode;
  /** Receives every progress line, prefixed with its stage (`[bootstrap]`, `[import]`). */
  onProgress?: (line: string) => void;
  /** Rebuild even when an up-to-date image is present. */
  force?: boolean;
  /** Import under this tag instead of the catalog's. */
  tag?: string;
  signal?: AbortSignal;
}

/** What a build did. */
export interface BuildResult {
  name: string;
  tag: string;
  /** The recipe hash stored in the `sandboxd.image.version` label. */
  version: string;
  imageId: string;
  /** True when an up-to-date image was present and nothing was built. */
  skipped: boolean;
  durationMs: number;
  sizeBytes: number;
}

/** `fresh`: present with the current recipe version; `stale`: present, older recipe. */
export type ImageState = 'absent' | 'stale' | 'fresh';

/** The state of a catalog image under its tag (or `tag`), with its size when present. */
export async function imageState(
  entry: CatalogEntry,
  { docker = new Dockerode(), tag = entry.tag }: { docker?: Dockerode; tag?: string } = {},
): Promise<{ state: ImageState; imageId?: string; sizeBytes?: number }> {
  const info = await inspectImage(docker, tag);
  if (!info) return { state: 'absent' };
  const fresh = info.Config?.Labels?.[LABEL_VERSION] === imageVersion(entry);
  return { state: fresh ? 'fresh' : 'stale', imageId: info.Id, sizeBytes: info.Size };
}

/** Whether Docker holds an image under `tag`. */
export async function isImagePresent(tag: string, docker: Dockerode = new Dockerode()): Promise<boolean> {
  return (await inspectImage(docker, tag)) !== undefined;
}

/** Builds under way in this process, by tag: a layer's build and a build of its `from` image share one. */
const building = new Map<string, Promise<BuildResult>>();

/**
 * Builds a catalog image. The base image: mmdebstrap bootstraps Debian into a temporary
 * tarball, which `docker import` turns into a one-layer image with the sandbox user, workdir and
 * labels. Every other image is a layer on its `from` image (built first when it is absent or
 * stale), made in a container of it (image-layer.ts). A present image with the current recipe
 * version is left alone unless `force` is set. A build of a tag already under way in this
 * process is joined, not started again; the temporary directory is removed whatever happens.
 */
export function buildImage(name: string, options: BuildOptions = {}): Promise<BuildResult> {
  const entry = catalogEntryFor(name);
  if (!entry) {
    return Promise.reject(notFound(`unknown image '${name}'; the catalog has: ${CATALOG.map((e) => e.name).join(', ')}`));
  }
  const tag = options.tag ?? entry.tag;
  const running = building.get(tag);
  if (running) return running;
  const build = buildEntry(entry, tag, options).finally(() => building.delete(tag));
  building.set(tag, build);
  return build;
}

async function buildEntry(entry: CatalogEntry, tag: string, options: BuildOptions): Promise<BuildResult> {
  const docker = options.docker ?? new Dockerode();
  const progress = options.onProgress ?? (() => {});
  const version = imageVersion(entry);
  const started = performance.now();

  const previous = await inspectImage(docker, tag);
  if (previous && !options.force && previous.Config?.Labels?.[LABEL_VERSION] === version) {
    const durationMs = performance.now() - started;
    return { name: entry.name, tag, version, imageId: previous.Id, skipped: true, durationMs, sizeBytes: previous.Size };
  }

  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-image-'));
  try {
    if (entry.from) {
      const parent = parentOf(entry);
      const [made] = await Promise.all([
        buildImage(parent.name, { docker, onProgress: (line) => progress(`[${parent.name}] ${line}`), ...(options.signal ? { signal: options.signal } : {}) }),
        entry.node ? fetchNodeRelease(entry.node, dir, progress, options.signal) : undefined,
      ]);
      progress(`[layer] on ${made.tag}: ${[...entry.packages, ...(entry.node ? [`node ${entry.node.version}`, `npm ${entry.node.npm}`] : [])].join(' ')}`);
      await buildLayer(docker, entry, made.tag, tag, dir, (line) => progress(`[layer] ${line}`), options.signal);
    } else {
      await bootstrap(docker, entry, tag, dir, progress, options.signal);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }

  const built = await inspectImage(docker, tag);
  if (!built) throw new ServiceError('IMAGE_UNAVAILABLE', `the build finished but ${tag} is not present`);
  if (previous && previous.Id !== built.Id) {
    // The replaced image would linger as a dangling 200 MB layer. Docker refuses (and we
    // ignore) the removal while a container, another tag or a layer image still uses it. A
    // replaced layer image may have held the last use of a replaced base image: that goes too.
    await docker.getImage(previous.Id).remove().catch(() => undefined);
    const parent = previous.Parent ? await inspectImage(docker, previous.Parent).catch(() => undefined) : undefined;
    if (parent && !parent.RepoTags?.length) await docker.getImage(parent.Id).remove().catch(() => undefined);
  }
  const durationMs = performance.now() - started;
  return { name: entry.name, tag, version, imageId: built.Id, skipped: false, durationMs, sizeBytes: built.Size };
}

/** The base image: mmdebstrap's tree of Debian, imported as `tag`. */
async function bootstrap(docker: Dockerode, entry: CatalogEntry, tag: string, dir: string, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const tarball = join(dir, 'rootfs.tar');
  const hook = join(dir, 'customize.sh');
  await writeFile(hook, CUSTOMIZE_HOOK, { mode: 0o755 });
  const sources = await debianSources(entry.suite);
  const from = sources.length ? sources.join('; ') : "mmdebstrap's default mirrors";
  progress(`[bootstrap] ${entry.suite} with ${entry.packages.join(' ')} from ${from}`);
  const args = mmdebstrapArgs(entry, tarball, hook, sources);
  await runMmdebstrap(args, (line) => progress(`[bootstrap] ${line}`), signal);
  await importTarball(docker, tarball, tag, importChanges(entry), (line) => progress(`[import] ${line}`), signal);
}

async function inspectImage(docker: Dockerode, tag: string): Promise<Dockerode.ImageInspectInfo | undefined> {
  try {
    return await docker.getImage(tag).inspect();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw dockerUnreachable(err);
  }
}

function dockerUnreachable(err: unknown): ServiceError {
  const detail = err instanceof Error ? err.message : String(err);
  return new ServiceError(
    'BACKEND_UNAVAILABLE',
    `cannot reach the Docker engine (${detail}); start it, e.g. with \`npm run setup\`, or set DOCKER_HOST`,
  );
}

/** Streams the tarball into the Engine's image create (fromSrc=-), reporting every 10 %. */
async function importTarball(
  docker: Dockerode,
  tarball: string,
  tag: string,
  changes: string[],
  progress: (line: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  const total = (await stat(tarball)).size;
  let sent = 0;
  let reported = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sent += chunk.length;
      const tenths = Math.floor((sent * 10) / total);
      if (tenths > reported) {
        reported = tenths;
        progress(`${tenths * 10}% of ${(total / 1e6).toFixed(0)} MB sent`);
      }
      done(null, chunk);
    },
  });
  const file = createReadStream(tarball);
  file.on('error', (err) => counter.destroy(err));
  const { repo, tag: version } = splitTag(tag);
  const failed = (detail: string) => new ServiceError('IMAGE_UNAVAILABLE', `docker import of ${tag} failed: ${detail}`);
  let response: NodeJS.ReadableStream;
  try {
    response = await docker.importImage(file.pipe(counter), {
      repo,
      tag: version,
      changes,
      message: 'sandboxd images build',
      abortSignal: signal,
    });
  } catch (err) {
    // An HTTP status means the engine answered and refused; anything else means no engine.
    if ((err as { statusCode?: number }).statusCode) throw failed((err as Error).message);
    throw dockerUnreachable(err);
  }
  await new Promise<void>((resolve, reject) => {
    let failure: string | undefined;
    docker.modem.followProgress(
      response,
      (err) => (err || failure ? reject(failed(failure ?? err?.message ?? 'unknown error')) : resolve()),
      (event: { status?: string; error?: string }) => {
        if (event.error) failure = event.error;
        else if (event.status) progress(event.status);
      },
    );
  });
}
