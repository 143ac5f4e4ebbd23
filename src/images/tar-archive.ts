/**
 * Tar archives through `tar-stream`: the build contexts sent to the engine, the trees
 * `docker import` turns into a root filesystem, and what the Engine API's getArchive returns.
 * ustar headers, with a PAX header where ustar cannot say it: a path or link target past its
 * fields (or not ASCII), and a size of 8 GiB or more (ustar's 11 octal digits end there).
 */
import { PassThrough, Readable, type Writable } from 'node:stream';
import tar from 'tar-stream';

interface Owner {
  uid?: number;
  gid?: number;
}

/** One entry of an archive written by {@link tarStream} or {@link tarArchive}. */
export type TarEntry =
  | ({ type: 'dir'; path: string; mode: number } & Owner)
  | ({ type: 'file'; path: string; mode: number; content: Buffer } & Owner)
  /** A file read as it is written (a big one need not fit in memory): `open` gives exactly `size` bytes. */
  | ({ type: 'file'; path: string; mode: number; size: number; open(): Readable } & Owner)
  | { type: 'symlink'; path: string; target: string };

/** An entry read from an archive by {@link readTar}: its header (PAX records applied) and its content; written back as it was. */
export interface TarRead {
  type: 'read';
  header: tar.Headers;
  content: Buffer;
}

/** The largest size ustar's size field holds (11 octal digits); a larger one goes in a PAX record. */
export const USTAR_MAX_SIZE = 0o77777777777;

/** Every entry's time: archives of the same entries are the same bytes. */
const EPOCH = new Date(0);

/** tar-stream's header with the PAX records it writes as they are (its typings leave them out). */
type PaxHeaders = tar.Headers & { pax?: Record<string, string> };

/** The header of an entry: owners as named (root otherwise), the time at the epoch. */
function headerOf(entry: TarEntry): PaxHeaders {
  if (entry.type === 'symlink') return { name: entry.path, type: 'symlink', linkname: entry.target, mode: 0o777, mtime: EPOCH };
  const owned = { mode: entry.mode, uid: entry.uid ?? 0, gid: entry.gid ?? 0, mtime: EPOCH };
  if (entry.type === 'dir') return { name: `${entry.path.replace(/\/$/, '')}/`, type: 'directory', ...owned };
  const size = 'content' in entry ? entry.content.length : entry.size;
  return { name: entry.path, type: 'file', size, ...owned, ...(size > USTAR_MAX_SIZE ? { pax: { size: String(size) } } : {}) };
}

/** Writes one entry into the pack; resolves when the pack has taken all of it. */
function writeEntry(pack: tar.Pack, entry: TarEntry | TarRead): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error | null) => (err ? reject(err) : resolve());
    if (entry.type === 'read') {
      pack.entry(entry.header, entry.content, done);
      return;
    }
    const header = headerOf(entry);
    if (entry.type !== 'file') {
      pack.entry(header, done);
    } else if ('content' in entry) {
      pack.entry(header, entry.content, done);
    } else {
      // tar-stream checks that the source gave `size` bytes, and fails the entry when not.
      const source = entry.open();
      const sink: Writable = pack.entry(header, (err) => {
        if (err) source.destroy();
        done(err);
      });
      source.once('error', (err) => {
        sink.destroy();
        reject(err);
      });
      source.pipe(sink);
    }
  });
}

/**
 * The archive of `entries`, in order, as a stream (ended by the two zero blocks of a tar's end).
 * It fails with the first entry that fails (a source that errs or gives another size than it
 * said); destroying it stops the writing.
 */
export function tarStream(entries: Iterable<TarEntry | TarRead>): Readable {
  const pack = tar.pack();
  // A stream of Node's own in front: tar-stream's pack ends without an error when an entry fails,
  // and its destroy() takes no callback, which an async iterator's early return waits for.
  const out = new PassThrough();
  pack.on('error', (err: Error) => out.destroy(err));
  pack.pipe(out);
  out.once('close', () => pack.destroy());
  void (async () => {
    for (const entry of entries) await writeEntry(pack, entry);
    pack.finalize();
  })().catch((err: Error) => out.destroy(err));
  return out;
}

/** The archive of `entries`, in order, as one buffer. */
export async function tarArchive(entries: Iterable<TarEntry | TarRead>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of tarStream(entries)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Reads an archive (ustar, GNU or PAX; an old one without ustar's magic too), calling `onEntry`
 * with each entry's header and content stream, one at a time; rejects `not a tar archive (...)`
 * for bytes that are not one.
 */
function extract(archive: Buffer | NodeJS.ReadableStream, onEntry: (header: tar.Headers, content: Readable) => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    const extractor = tar.extract({ allowUnknownFormat: true });
    const fail = (err: Error) => reject(new Error(`not a tar archive (${err.message})`));
    extractor.on('entry', (header, stream, next) => {
      onEntry(header, stream).then(() => next(), (err: Error) => {
        stream.resume();
        next(err);
      });
    });
    extractor.once('finish', () => resolve());
    extractor.on('error', fail);
    if (Buffer.isBuffer(archive)) {
      extractor.end(archive);
    } else {
      archive.on('error', fail);
      archive.pipe(extractor);
    }
  });
}

/** Every entry of an archive, in order; `not a tar archive (...)` for bytes that are not one. */
export async function readTar(archive: Buffer): Promise<TarRead[]> {
  const entries: TarRead[] = [];
  await extract(archive, async (header, stream) => {
    entries.push({ type: 'read', header, content: await collect(stream) });
  });
  return entries;
}

/**
 * The content of the first regular file of an archive (what the Engine API's getArchive
 * returns for one file), or undefined when there is none (the path is a symlink, say).
 */
export async function firstTarFile(archive: Buffer | NodeJS.ReadableStream): Promise<Buffer | undefined> {
  let first: Buffer | undefined;
  await extract(archive, async (header, stream) => {
    if (first === undefined && (header.type === 'file' || header.type === 'contiguous-file')) first = await collect(stream);
    else stream.resume();
  });
  return first;
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
