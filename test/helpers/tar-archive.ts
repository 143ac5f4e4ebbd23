/** One entry of a tar archive built by {@link tarArchive}. */
export type TarEntry =
  | { type: 'dir'; path: string; mode: number; uid?: number; gid?: number }
  | { type: 'file'; path: string; mode: number; content: Buffer; uid?: number; gid?: number }
  | { type: 'symlink'; path: string; target: string };

const BLOCK = 512;

/**
 * A ustar archive of `entries`, in order, with the owners they name (root otherwise): what
 * `docker import` turns into a root filesystem, without the host's tar or a chown as root.
 * Paths are relative to the root and at most 100 bytes, which is all a test image needs.
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

function header(entry: TarEntry, size: number): Buffer {
  const name = entry.type === 'dir' ? `${entry.path.replace(/\/$/, '')}/` : entry.path;
  if (Buffer.byteLength(name) > 100) throw new Error(`tar path too long for ustar: ${name}`);
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
  const checksum = block.reduce((sum, byte) => sum + byte, 0);
  block.write(`${checksum.toString(8).padStart(6, '0')}\0 `, 148);
  return block;
}
