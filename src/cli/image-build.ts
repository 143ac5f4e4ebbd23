import { createReadStream, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { ServiceError } from '../errors.js';
import { tarArchive, type TarEntry } from '../images/tar-archive.js';
import { sseEvents } from '../client/sse-events.js';
import type { Connection } from './client/connection.js';
import { printJson, UsageError } from './client/output.js';

export interface DockerfileBuildOptions {
  file: string;
  name?: string;
  json: boolean;
}

/** Folders a context never needs, left out as `.dockerignore` usually does. */
const SKIPPED = new Set(['.git', 'node_modules']);

/** The directory as tar entries, modes kept (executables stay executable), symlinks as links. */
function contextEntries(root: string, dir = root): TarEntry[] {
  const entries: TarEntry[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (dir === root && SKIPPED.has(name)) continue;
    const path = join(dir, name);
    const inside = relative(root, path).split('\\').join('/');
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) entries.push({ type: 'symlink', path: inside, target: readlinkSync(path) });
    else if (stat.isDirectory()) entries.push({ type: 'dir', path: inside, mode: stat.mode & 0o7777 }, ...contextEntries(root, path));
    else if (stat.isFile()) entries.push({ type: 'file', path: inside, mode: stat.mode & 0o7777, size: stat.size, open: () => createReadStream(path) });
  }
  return entries;
}

/** A directory's name as an image name: lowercase, other characters as dashes. */
const nameFrom = (dir: string) =>
  basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '') || 'image';

/**
 * `sandboxd images build --file Dockerfile DIR`: sends DIR (as a tar) and the Dockerfile to the
 * server's POST /images and streams the build log to stderr; stdout gets the image's tag (or
 * its JSON with --json). A failed build exits 1 with the engine's reason.
 */
export async function buildFromDockerfile(dir: string, options: DockerfileBuildOptions, connect: () => Connection): Promise<void> {
  let dockerfile: string;
  let context: Buffer;
  try {
    dockerfile = readFileSync(options.file, 'utf8');
    context = await tarArchive(contextEntries(resolve(dir)));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const name = options.name ?? nameFrom(dir);
  const response = await connect().open({ method: 'POST', path: '/images', body: { name, dockerfile, context: context.toString('base64') }, accept: 'text/event-stream' });
  for await (const event of sseEvents(response)) {
    const data = JSON.parse(event.data) as { content?: string; message?: string; tag?: string };
    if (event.event === 'log') process.stderr.write(data.content ?? '');
    else if (event.event === 'error') throw new ServiceError('BAD_REQUEST', data.message ?? 'the image build failed');
    else if (event.event === 'done') {
      if (options.json) printJson(data);
      else process.stdout.write(`${data.tag}\n`);
      return;
    }
  }
  throw new ServiceError('INTERNAL', 'the server ended the build stream without a result');
}
