import type { Readable } from 'node:stream';
import type { Backend, UnpackSummary } from '../../backends/backend.js';
import { requireCapability } from '../support/capabilities.js';
import { ServiceError, badRequest, isServiceError } from '../../errors.js';
import { ConcurrencyLimit } from '../support/concurrency-limit.js';
import type { AuditApi } from '../events/api.js';
import type { SandboxService } from './sandbox-service.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { VolumeMount } from '../../domain/volumes.js';
import type { ServiceContext } from '../context.js';

export type Encoding = 'utf8' | 'base64';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Longest path, in bytes, that the kernel takes (PATH_MAX, its NUL included). */
export const MAX_PATH_BYTES = 4096;
/** Longest name of one path component, in bytes (NAME_MAX). */
export const MAX_NAME_BYTES = 255;
/** Pseudo-filesystems of devices and kernel state: the files API writes and deletes nothing there. */
const SYSTEM_DIRS = ['/dev', '/proc', '/sys'];

/**
 * Reads of the JSON form at once, server-wide: each holds a file of up to 64 MiB several times
 * over (bytes, base64, the serialised reply), ~300 MB at the cap.
 */
export const BUFFERED_READS = 2;
/** Streamed (raw) reads at once, server-wide: each holds a socket to the agent and a stream buffer. */
export const STREAMED_READS = 16;

/**
 * The absolute, normalised path inside a sandbox for a client-given path. `..` segments
 * and NUL bytes are refused rather than resolved, so a path always means what it says; a path
 * longer than the kernel takes (PATH_MAX, NAME_MAX per component) is refused here rather than
 * failing inside the sandbox. Relative paths are taken from /workspace.
 */
export function sandboxPath(raw: string, field = 'path'): string {
  if (raw.includes('\0')) throw badRequest(`${field}: must not contain NUL bytes`);
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw badRequest(`${field}: '${raw}' must not contain '..' segments`);
  if (segments.length === 0) throw badRequest(`${field}: a file path is required`);
  if (segments.some((segment) => Buffer.byteLength(segment) > MAX_NAME_BYTES)) {
    throw badRequest(`${field}: each name in a path must be at most ${MAX_NAME_BYTES} bytes`);
  }
  const path = (raw.startsWith('/') ? '/' : '/workspace/') + segments.join('/');
  if (Buffer.byteLength(path) >= MAX_PATH_BYTES) throw badRequest(`${field}: must be shorter than ${MAX_PATH_BYTES} bytes`);
  return path;
}

/** A sandboxPath that may be written or deleted: nothing under /dev, /proc or /sys (devices, kernel state). */
export function writablePath(raw: string, field = 'path'): string {
  return writable(sandboxPath(raw, field), field);
}

/** The absolute path, when it is not under /dev, /proc or /sys. */
function writable(path: string, field: string): string {
  return notSystem(path, 'writes and deletes regular files only', field);
}

/** The path, when it is not under /dev, /proc or /sys; else a refusal that says what the route `does`. */
function notSystem(path: string, does: string, field = 'path'): string {
  const system = SYSTEM_DIRS.find((dir) => path === dir || path.startsWith(`${dir}/`));
  if (system) throw badRequest(`${field}: '${path}' is under ${system}, which holds devices and kernel state; the files API ${does}`);
  return path;
}

/**
 * Top-level directories that every image sandboxd runs has (those of the Filesystem Hierarchy
 * Standard that Debian makes, and /workspace): a relative path that starts with one of them is
 * absolute without asking the sandbox.
 */
const ROOT_DIRECTORIES = new Set([
  'bin', 'boot', 'dev', 'etc', 'home', 'lib', 'lib64', 'media', 'mnt', 'opt', 'proc',
  'root', 'run', 'sbin', 'srv', 'sys', 'tmp', 'usr', 'var', 'workspace',
]);

/** The first name of a path, `data` for `data/v.txt` or `/data/v.txt`. */
function firstSegment(raw: string): string {
  return raw.split('/').find((segment) => segment !== '' && segment !== '.') ?? '';
}

/** What path resolution needs of a sandbox. */
type Located = Pick<SandboxRecord, 'volumes'> & { backend_id: string };

/**
 * The absolute path that a client-given path names in this sandbox (docs/files-and-volumes.md,
 * "Paths"): a path with a leading slash is absolute; one without is absolute when its first
 * name exists at the sandbox's root or is where a volume is mounted (`data/v.txt` is
 * /data/v.txt beside a volume at /data), else it is under /workspace (`app/main.py` is
 * /workspace/app/main.py). The sandbox is asked only for a first name that is neither a
 * directory every image has nor a volume's. The path's form was checked by `sandboxPath`.
 */
export async function resolvePath(backend: Backend, sandbox: Located, raw: string, field = 'path'): Promise<string> {
  const underWorkspace = sandboxPath(raw, field);
  if (raw.startsWith('/')) return underWorkspace;
  return (await atRoot(backend, sandbox, firstSegment(raw))) ? sandboxPath(`/${raw}`, field) : underWorkspace;
}

/** Whether `/<name>` exists in the sandbox or is where one of its volumes is mounted. */
async function atRoot(backend: Backend, sandbox: Located, name: string): Promise<boolean> {
  if (ROOT_DIRECTORIES.has(name) || volumeAt(sandbox, `/${name}`, true)) return true;
  if (!backend.capabilities.fileViews) return false;
  return backend.capabilities.fileViews.stat(sandbox.backend_id, `/${name}`).then(
    () => true,
    (err: unknown) => {
      if (isServiceError(err) && err.code === 'NOT_FOUND') return false;
      throw err;
    },
  );
}

/** The volume mounted at `path` (or, with `below`, at `path` or under it). */
function volumeAt(sandbox: Located, path: string, below = false): VolumeMount | undefined {
  return sandbox.volumes?.find((volume) => volume.path === path || (below && volume.path.startsWith(`${path}/`)));
}

/**
 * Refuses, before anything is touched, to delete what a files call must never remove: the
 * root, a top-level directory (`/tmp`, `/workspace`, `/data`: removing one empties what it
 * can of a tree the system or the sandbox's programs rely on, then fails), and a volume's
 * mount point (its contents are the volume's; delete the volume instead).
 */
async function checkRemovable(backend: Backend, sandbox: Located, path: string): Promise<void> {
  const volume = volumeAt(sandbox, path);
  if (volume) throw badRequest(`path: '${path}' is where volume '${volume.name}' is mounted: delete files under it, or the volume itself`);
  if (path.split('/').length !== 2) return;
  const directory = ROOT_DIRECTORIES.has(path.slice(1)) || (backend.capabilities.fileViews && (await backend.capabilities.fileViews.stat(sandbox.backend_id, path).then((entry) => entry.type === 'dir', () => false)));
  if (directory) throw badRequest(`path: '${path}' is a top-level directory: the files API removes files and directories below it, not it`);
}

/** Bytes of client content in the given encoding. */
export function decodeContent(content: string, encoding: Encoding = 'utf8', field = 'content'): Buffer {
  if (encoding === 'utf8') return Buffer.from(content, 'utf8');
  const bytes = decodeBase64(content);
  if (!bytes) throw badRequest(`${field}: is not valid base64`);
  return bytes;
}

/**
 * Strict base64 (standard alphabet, padded, no whitespace) in native code: Node's decoder
 * skips ASCII characters outside the alphabet and stops at `=`, so any such character makes
 * the result shorter than the length the text promises. It also takes the URL-safe `-` and
 * `_` and reads only the low byte of a character past U+00FF, so those are refused first.
 * The regular expression this replaces cost ~8 ms per MiB.
 */
export function decodeBase64(text: string): Buffer | undefined {
  if (text.length % 4 !== 0 || text.includes('-') || text.includes('_')) return undefined;
  if (Buffer.byteLength(text, 'utf8') !== text.length) return undefined;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === (text.length / 4) * 3 - padding ? bytes : undefined;
}

/** Reads, writes and deletes files inside running sandboxes. */
export class FileService {
  private readonly sandboxes: SandboxService;
  private readonly backend: Backend;
  private readonly audit: AuditApi;

  private readonly bufferedReads = new ConcurrencyLimit(BUFFERED_READS);
  private readonly streamedReads = new ConcurrencyLimit(STREAMED_READS);

  constructor(ctx: Pick<ServiceContext, 'backend' | 'audit'> & { sandboxes: SandboxService }) {
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
  }

  /** Writes client content given as text in an encoding (the JSON form of PUT). */
  async write(name: string, rawPath: string, content: string, encoding?: Encoding): Promise<string> {
    writablePath(rawPath);
    return this.writeBytes(name, rawPath, decodeContent(content, encoding));
  }

  /** Writes the bytes as they are (the raw form of PUT, `application/octet-stream`). */
  async writeBytes(name: string, rawPath: string, bytes: Buffer): Promise<string> {
    writablePath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = writable(await resolvePath(this.backend, sandbox, rawPath), 'path');
    await this.backend.writeFile(sandbox.backend_id, path, bytes);
    await this.sandboxes.touch(sandbox);
    await this.audit.record('file_written', sandbox, { path, bytes: bytes.length });
    return `wrote ${bytes.length} bytes to ${path}`;
  }

  /** Writes several files; every path and content is checked before the first is written. */
  async writeMany(name: string, files: Record<string, string>, encoding?: Encoding): Promise<{ written: number }> {
    const prepared = Object.entries(files).map(([raw, content]) => ({
      raw,
      field: `files['${raw}']`,
      path: writablePath(raw, `files['${raw}']`),
      bytes: decodeContent(content, encoding, `files['${raw}']`),
    }));
    if (prepared.length === 0) throw badRequest('files: must name at least one file');
    const sandbox = await this.sandboxes.requireRunning(name);
    for (const file of prepared) file.path = writable(await resolvePath(this.backend, sandbox, file.raw, file.field), file.field);
    for (const file of prepared) {
      await this.backend.writeFile(sandbox.backend_id, file.path, file.bytes);
      await this.audit.record('file_written', sandbox, { path: file.path, bytes: file.bytes.length });
    }
    await this.sandboxes.touch(sandbox);
    return { written: prepared.length };
  }

  /**
   * The file's content: utf8 when it is text, base64 otherwise (the JSON form of GET). The
   * whole file is in memory, several times over once encoded, so the backend's cap applies
   * (64 MiB) and at most BUFFERED_READS such reads run at once; the others wait their turn.
   */
  async read(name: string, rawPath: string): Promise<{ content: string; encoding: Encoding; size: number }> {
    sandboxPath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = await resolvePath(this.backend, sandbox, rawPath);
    const release = await this.bufferedReads.acquire();
    try {
      const bytes = await this.backend.readFile(sandbox.backend_id, path).catch(pointToListing(name, path));
      await this.sandboxes.touch(sandbox);
      await this.audit.record('file_read', sandbox, { path, bytes: bytes.length });
      const text = asText(bytes);
      return text === undefined
        ? { content: bytes.toString('base64'), encoding: 'base64', size: bytes.length }
        : { content: text, encoding: 'utf8', size: bytes.length };
    } finally {
      release();
    }
  }

  /**
   * The file's bytes as they are, streamed (the raw form of GET, `Accept:
   * application/octet-stream`): any size, held in memory only as the client takes them. At most
   * STREAMED_READS run at once; past that the read is refused (BUSY), since a slow client may
   * hold its slot for long. The audit entry is written once the file is open (its size is
   * known only at the end), with `streamed: true`.
   */
  async readStream(name: string, rawPath: string): Promise<Readable> {
    sandboxPath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = await resolvePath(this.backend, sandbox, rawPath);
    return this.streamed(() => this.backend.readFileStream(sandbox.backend_id, path).catch(pointToListing(name, path)), async () => {
      await this.sandboxes.touch(sandbox);
      await this.audit.record('file_read', sandbox, { path, streamed: true });
    });
  }

  /**
   * A tar of what a directory holds (GET /archive: a copy out of the sandbox), streamed in one
   * of the streamed reads' slots; one `copied` audit entry, `direction: "out"`.
   */
  async pack(name: string, rawPath: string): Promise<Readable> {
    notSystem(sandboxPath(rawPath), 'packs directories of files');
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = notSystem(await resolvePath(this.backend, sandbox, rawPath), 'packs directories of files');
    const archives = requireCapability(this.backend, 'fileArchives');
    return this.streamed(() => archives.packDirectory(sandbox.backend_id, path), async () => {
      await this.sandboxes.touch(sandbox);
      await this.audit.record('copied', sandbox, { path, direction: 'out' });
    });
  }

  /** Unpacks a tar into a directory (PUT /archive: a copy into the sandbox); one `copied` audit entry, `direction: "in"`. */
  async unpack(name: string, rawPath: string, archive: Buffer): Promise<UnpackSummary> {
    writablePath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = writable(await resolvePath(this.backend, sandbox, rawPath), 'path');
    const summary = await requireCapability(this.backend, 'fileArchives').unpackInto(sandbox.backend_id, path, archive);
    await this.sandboxes.touch(sandbox);
    await this.audit.record('copied', sandbox, { path, direction: 'in', entries: summary.entries, bytes: summary.bytes });
    return summary;
  }

  /**
   * Opens a stream in one of STREAMED_READS slots (BUSY past them: a slow client may hold its
   * slot for long), released when the stream closes; `opened` runs once it is open.
   */
  private async streamed(open: () => Promise<Readable>, opened: () => Promise<void>): Promise<Readable> {
    const release = this.streamedReads.tryAcquire();
    if (!release) throw new ServiceError('BUSY', `${STREAMED_READS} file reads are under way (raw files and archives): retry when one has finished`);
    let stream: Readable | undefined;
    try {
      stream = await open();
      stream.once('close', release);
      await opened();
      return stream;
    } catch (err) {
      // Destroying the stream closes it, which releases the slot.
      if (stream) stream.destroy();
      else release();
      throw err;
    }
  }

  /** Deletes a file, or a directory with everything in it (never the root, a top-level directory or a volume's mount point). */
  async delete(name: string, rawPath: string): Promise<string> {
    if (rawPath.split('/').every((segment) => segment === '' || segment === '.')) {
      throw badRequest("path: '/' is the sandbox's root: the files API removes files and directories below it, not it");
    }
    writablePath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const path = writable(await resolvePath(this.backend, sandbox, rawPath), 'path');
    await checkRemovable(this.backend, sandbox, path);
    await this.backend.deleteFile(sandbox.backend_id, path);
    await this.sandboxes.touch(sandbox);
    await this.audit.record('file_deleted', sandbox, { path });
    return `deleted ${path}`;
  }
}

/** A read of a directory is refused with the route that lists it. */
function pointToListing(name: string, path: string): (err: unknown) => never {
  return (err) => {
    if (isServiceError(err) && err.code === 'BAD_REQUEST' && err.message.endsWith(`'${path}' is a directory`)) {
      throw badRequest(`'${path}' is a directory`, { hint: { action: 'list_directory', sandbox: name, path } });
    }
    throw err;
  };
}

/** The bytes as a string when they are valid UTF-8 text without NUL bytes. */
function asText(bytes: Buffer): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}
