import Dockerode from 'dockerode';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { ServiceError, notFound } from '../errors.js';
import { CATALOG, catalogEntryFor, type CatalogEntry } from './catalog.js';
import { debianSources } from './debian-mirror.js';
import { customizeHook, importChanges, imageVersion, LABEL_VERSION, mmdebstrapArgs } from './image-recipe.js';
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

/**
 * Builds a catalog image: mmdebstrap bootstraps Debian into a temporary tarball, which
 * `docker import` turns into a one-layer image with the sandbox user, workdir and labels.
 * A present image with the current recipe version is left alone unless `force` is set.
 * The temporary directory is removed whatever happens.
 */
export async function buildImage(name: string, options: BuildOptions = {}): Promise<BuildResult> {
  const entry = catalogEntryFor(name);
  if (!entry) {
    throw notFound(`unknown image '${name}'; the catalog has: ${CATALOG.map((e) => e.name).join(', ')}`);
  }
  const docker = options.docker ?? new Dockerode();
  const tag = options.tag ?? entry.tag;
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
    const tarball = join(dir, 'rootfs.tar');
    const hook = join(dir, 'customize.sh');
    await writeFile(hook, customizeHook(entry), { mode: 0o755 });
    if (entry.node) await fetchNodeRelease(entry.node, dir, progress, options.signal);
    const sources = await debianSources(entry.suite);
    const from = sources.length ? sources.join('; ') : "mmdebstrap's default mirrors";
    progress(`[bootstrap] ${entry.suite} with ${entry.packages.join(' ')} from ${from}`);
    const args = mmdebstrapArgs(entry, tarball, hook, sources);
    await runMmdebstrap(args, (line) => progress(`[bootstrap] ${line}`), options.signal);
    const changes = importChanges(entry);
    await importTarball(docker, tarball, tag, changes, (line) => progress(`[import] ${line}`), options.signal);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }

  const built = await inspectImage(docker, tag);
  if (!built) throw new ServiceError('IMAGE_UNAVAILABLE', `docker import finished but ${tag} is not present`);
  if (previous && previous.Id !== built.Id) {
    // The replaced image would linger as a dangling 200 MB layer. Docker refuses (and we
    // ignore) the removal while a container or another tag still uses it.
    await docker.getImage(previous.Id).remove().catch(() => undefined);
  }
  const durationMs = performance.now() - started;
  return { name: entry.name, tag, version, imageId: built.Id, skipped: false, durationMs, sizeBytes: built.Size };
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

/** `repo:tag` split at the last colon after the last slash (a registry port is not a tag). */
export function splitTag(tag: string): { repo: string; tag: string } {
  const colon = tag.lastIndexOf(':');
  if (colon > tag.lastIndexOf('/')) return { repo: tag.slice(0, colon), tag: tag.slice(colon + 1) };
  return { repo: tag, tag: 'latest' };
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
