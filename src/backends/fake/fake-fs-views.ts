import { posix } from 'node:path';
import { badRequest, notFound } from '../../errors.js';
import { readTar, tarArchive, type TarEntry } from '../../images/tar-archive.js';
import type { FsEntry, FsListing, FsWatchEvent, VolumeInfo } from '../backend.js';

/** Directories every fake instance has, though no file is in them. */
const ALWAYS = new Set(['/', '/workspace']);
const EPOCH = new Date(0).toISOString();

/** The fake's files (a path -> content map, directories implied by their files) as the views show them. */
export function fakeListing(files: ReadonlyMap<string, Buffer>, path: string): FsListing {
  if (files.has(path)) throw badRequest(`'${path}' is not a directory: only a directory can be listed`);
  const prefix = path === '/' ? '/' : `${path}/`;
  const children = new Map<string, FsEntry>();
  for (const [file, content] of files) {
    if (!file.startsWith(prefix)) continue;
    const [name = '', ...rest] = file.slice(prefix.length).split('/');
    children.set(name, rest.length > 0 ? entry(name, 'dir', 0) : entry(name, 'file', content.length));
  }
  if (children.size === 0 && !ALWAYS.has(path)) throw notFound(`path '${path}' not found`);
  return { path, entries: [...children.values()].sort((a, b) => (a.name < b.name ? -1 : 1)), truncated: false };
}

export function fakeStat(files: ReadonlyMap<string, Buffer>, path: string): FsEntry {
  const name = path.split('/').pop() || '/';
  const content = files.get(path);
  if (content) return entry(name, 'file', content.length);
  fakeListing(files, path);
  return entry(name, 'dir', 0);
}

function entry(name: string, type: 'file' | 'dir', size: number): FsEntry {
  return { name, type, size, mode: type === 'dir' ? '0755' : '0644', mtime: EPOCH };
}

/** The watches of the fake's instances: writes and deletes through the backend are their events. */
export class FakeWatches {
  private readonly watchers = new Set<{ id: string; path: string; push: (event: FsWatchEvent) => void }>();

  /** Events under `path` of instance `id` until `signal` aborts. */
  watch(id: string, path: string, signal: AbortSignal): AsyncIterable<FsWatchEvent> {
    const queue: FsWatchEvent[] = [];
    let wake: (() => void) | undefined;
    const watcher = { id, path, push: (event: FsWatchEvent) => (queue.push(event), wake?.()) };
    this.watchers.add(watcher);
    signal.addEventListener('abort', () => (this.watchers.delete(watcher), wake?.()), { once: true });
    return {
      async *[Symbol.asyncIterator]() {
        while (!signal.aborted) {
          const event = queue.shift();
          if (event) yield event;
          else await new Promise<void>((resolve) => (wake = resolve));
        }
      },
    };
  }

  /** Watches under way, for tests that check that a client leaving ends one. */
  get active(): number {
    return this.watchers.size;
  }

  emit(id: string, event: 'created' | 'modified' | 'deleted', path: string): void {
    for (const watcher of this.watchers) {
      if (watcher.id === id && (path === watcher.path || path.startsWith(watcher.path === '/' ? '/' : `${watcher.path}/`))) watcher.push({ event, path, type: 'file' });
    }
  }
}

/** The fake's named volumes: names and creation times; their contents are not modelled. */
export class FakeVolumes {
  readonly volumes = new Map<string, VolumeInfo>();
  /** Whether a claim adds mounts (a create with volumes then may take a pool instance). */
  mountsOnClaim = false;

  create(name: string): VolumeInfo {
    const info = { name, created_at: new Date().toISOString() };
    this.volumes.set(name, info);
    return info;
  }
}

/** A tar of the files under `path` (names relative to it), as the fake keeps them: regular files only. */
export async function fakePack(files: ReadonlyMap<string, Buffer>, path: string): Promise<Buffer> {
  fakeListing(files, path);
  const prefix = path === '/' ? '/' : `${path}/`;
  const entries: TarEntry[] = [...files]
    .filter(([file]) => file.startsWith(prefix))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([file, content]) => ({ type: 'file', path: file.slice(prefix.length), mode: 0o644, content }));
  return tarArchive(entries);
}

/**
 * The files a tar unpacks to under `path`, checked whole before any is written: names that are
 * absolute or hold `..` are refused, as are entries that are neither files nor directories (the
 * fake keeps no links).
 */
export async function fakeUnpack(path: string, archive: Buffer): Promise<Map<string, Buffer>> {
  const entries = await readTar(archive).catch((err: Error) => {
    throw badRequest(`the body is ${err.message}`);
  });
  const unpacked = new Map<string, Buffer>();
  for (const { header, content } of entries) {
    const name = posix.normalize(header.name).replace(/\/$/, '');
    if (name.startsWith('/') || name === '..' || name.startsWith('../')) throw badRequest(`archive entry '${header.name}' is outside the directory: names must be relative, without '..'`);
    if (header.type === 'directory') continue;
    if (header.type !== 'file') throw badRequest(`archive entry '${header.name}' is a ${header.type}: the fake backend unpacks files and directories only`);
    unpacked.set(posix.join(path, name), content);
  }
  return unpacked;
}
