import type Dockerode from 'dockerode';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { ServiceError } from '../errors.js';
import type { CatalogEntry } from './catalog.js';
import { importChanges, LAYER_DIR, layerScript, splitTag } from './image-recipe.js';
import { followLog } from './mmdebstrap.js';
import { tarStream, type TarEntry } from './tar-archive.js';

/** The build container of a catalog image: one name per image, so a build cut short is found by the next. */
export const layerContainerName = (entry: CatalogEntry): string => `sandboxd-image-build-${entry.name}`;

/**
 * Makes a layer image (a catalog entry with `from`): a container of the `from` image (`parentTag`)
 * runs {@link layerScript} as root, with the files in `dir` (the Node.js tarballs) beside it,
 * and is committed as `tag` with the catalog's user, workdir, environment and labels. The
 * container has the host's network only when the layer installs Debian packages (apt reaches
 * the mirrors the host reaches, as mmdebstrap's did), none otherwise; it is removed whatever
 * happens, and a build cut short (kill -9) leaves one that the next build of the image removes.
 */
export async function buildLayer(
  docker: Dockerode,
  entry: CatalogEntry,
  parentTag: string,
  tag: string,
  dir: string,
  progress: (line: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  const name = layerContainerName(entry);
  await docker.getContainer(name).remove({ force: true }).catch(() => undefined);
  const container = await docker.createContainer({
    name,
    Image: parentTag,
    User: 'root',
    WorkingDir: '/',
    Cmd: ['sh', `${LAYER_DIR}/layer.sh`],
    HostConfig: { NetworkMode: entry.packages.length ? 'host' : 'none' },
  });
  const kill = () => void container.kill().catch(() => undefined);
  signal?.addEventListener('abort', kill, { once: true });
  try {
    await container.putArchive(await layerFiles(entry, dir), { path: '/' });
    const tail = await runLogged(docker, container, progress);
    const { StatusCode: code } = (await container.wait()) as { StatusCode: number };
    if (signal?.aborted) throw new ServiceError('IMAGE_UNAVAILABLE', 'image build cancelled');
    if (code !== 0) {
      throw new ServiceError(
        'IMAGE_UNAVAILABLE',
        `building ${tag} on ${parentTag} failed (exit code ${code}). Its last lines:\n${tail.join('\n')}\n` +
          'Usual cause: the Debian mirror in the image\'s apt sources is unreachable (set SANDBOXD_DEBIAN_MIRROR=URI and rebuild the base image with --force).',
      );
    }
    const { repo, tag: version } = splitTag(tag);
    await container.commit({ repo, tag: version, changes: importChanges(entry) });
  } finally {
    signal?.removeEventListener('abort', kill);
    await container.remove({ force: true }).catch(() => undefined);
  }
}

/** The layer's directory as an archive for putArchive at `/`: the script, and the Node.js tarballs when it has Node.js. */
async function layerFiles(entry: CatalogEntry, dir: string): Promise<NodeJS.ReadableStream> {
  const at = LAYER_DIR.replace(/^\//, '');
  const entries: TarEntry[] = [
    { type: 'dir', path: at, mode: 0o700 },
    { type: 'file', path: `${at}/layer.sh`, mode: 0o700, content: Buffer.from(layerScript(entry)) },
  ];
  for (const file of entry.node ? ['node.tgz', 'npm.tgz'] : []) {
    const path = join(dir, file);
    entries.push({ type: 'file', path: `${at}/${file}`, mode: 0o600, size: (await stat(path)).size, open: () => createReadStream(path) });
  }
  return tarStream(entries);
}

/**
 * Starts the container with its output going to `progress` line by line, and resolves, once the
 * output has ended, with its last lines.
 */
async function runLogged(docker: Dockerode, container: Dockerode.Container, progress: (line: string) => void): Promise<string[]> {
  const stream = await container.attach({ stream: true, stdout: true, stderr: true });
  const lines = new PassThrough();
  docker.modem.demuxStream(stream, lines, lines);
  stream.on('end', () => lines.end());
  const log = followLog(lines, progress);
  await container.start();
  await log.ended;
  return log.tail;
}
