/** One entry of a tar archive built by {@link tarArchive}. */
export type TarEntry =
  | { type: 'dir'; path: string; mode: number; uid?: number; gid?: number }
  | { type: 'file'; path: string; mode: number; content: Buffer; uid?: number; gid?: number }
  | { type: 'symlink'; path: string; target: string };

const BLOCK = 512;

/**
 * A ustar archive of `entries`, in order, with the owners they name (root otherwise): a build
 * context for the engine, or what `docker import` turns into a root filesystem, without the
 * host's tar. A path longer than 100 bytes is split over ustar's prefix field (255 at most).
 */
export function tarArchive(entries: readonly TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const content = entry.type === 'file' ? entry.content : Buffer.alloc(0);
    blocks.push(header(entry, content.length), content, Buffer.alloc((BLOCK - (content.length % BLOCK)) % BLOCK));
  }
  blocks.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(blocks);
}

/** The path as ustar's name and prefix fields (split at a slash), or an error for one too long. */
function splitPath(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let cut = path.indexOf('/'); cut > 0; cut = path.indexOf('/', cut + 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  throw new Error(`tar path too long for ustar (255 bytes, a name of 100 after a slash at most): ${path}`);
}

function header(entry: TarEntry, size: number): Buffer {
  const { name, prefix } = splitPath(entry.type === 'dir' ? `${entry.path.replace(/\/$/, '')}/` : entry.path);
  const block = Buffer.alloc(BLOCK);
  const octal = (value: number, width: number) => value.toString(8).padStart(width - 1, '0') + '\0';
  const owned: { uid?: number; gid?: number } = entry.type === 'symlink' ? {} : entry;
  block.write(name, 0, 100, 'utf8');
  block.write(octal(entry.type === 'symlink' ? 0o777 : entry.mode, 8), 100);
  block.write(octal(owned.uid ?? 0, 8), 108);
  block.write(octal(owned.gid ?? 0, 8), 116);
  block.write(octal(size, 12), 124);
  block.write(octal(0, 12), 136);
  block.write(' '.repeat(8), 148);
  block.write({ file: '0', symlink: '2', dir: '5' }[entry.type], 156);
  if (entry.type === 'symlink') block.write(entry.target, 157, 100, 'utf8');
  block.write('ustar\0', 257);
  block.write('00', 263);
  block.write(prefix, 345, 155, 'utf8');
  const checksum = block.reduce((sum, byte) => sum + byte, 0);
  block.write(`${checksum.toString(8).padStart(6, '0')}\0 `, 148);
  return block;
}

/** One entry of an archive read by {@link tarEntries}: its path and where its content lies. */
export interface TarListing {
  path: string;
  offset: number;
  size: number;
}

/**
 * The entries of a ustar (or GNU/pax-headed) archive and the offset where its end-of-archive
 * blocks start (appending there adds entries); an error for bytes that are not such an archive.
 */
export function tarEntries(archive: Buffer): { entries: TarListing[]; end: number } {
  const entries: TarListing[] = [];
  let offset = 0;
  while (offset + BLOCK <= archive.length) {
    const block = archive.subarray(offset, offset + BLOCK);
    if (block.every((byte) => byte === 0)) return { entries, end: offset };
    const field = (start: number, length: number) => block.toString('utf8', start, start + length).replace(/\0.*$/s, '');
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const stored = block.reduce((sum, byte, i) => sum + (i >= 148 && i < 156 ? 32 : byte), 0);
    if (Number.isNaN(size) || parseInt(field(148, 8).trim(), 8) !== stored) throw new Error(`not a tar archive (a bad header at byte ${offset})`);
    const prefix = field(257, 6) === 'ustar' ? field(345, 155) : '';
    entries.push({ path: prefix ? `${prefix}/${field(0, 100)}` : field(0, 100), offset: offset + BLOCK, size });
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  if (offset === archive.length) return { entries, end: offset };
  throw new Error('not a tar archive (it ends inside an entry)');
}
