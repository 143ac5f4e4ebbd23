const BLOCK = 512;

/**
 * The content of the first regular file in a tar archive (what the Engine API's getArchive
 * returns for one file), or undefined when there is none (e.g. the path is a symlink).
 * Extended-header entries (pax, GNU long names) are skipped.
 */
export function readTarEntry(archive: Buffer): Buffer | undefined {
  let offset = 0;
  while (offset + BLOCK <= archive.length) {
    const header = archive.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) return undefined;
    const size = parseInt(header.subarray(124, 136).toString('ascii').replace(/\0.*$/s, '').trim() || '0', 8);
    const type = String.fromCharCode(header[156] ?? 0);
    const start = offset + BLOCK;
    if (type === '0' || type === '\0') return archive.subarray(start, start + size);
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  return undefined;
}
