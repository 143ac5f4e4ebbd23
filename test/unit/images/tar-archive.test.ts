import { execFileSync } from 'node:child_process';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { firstTarFile, readTar, tarArchive, tarStream, USTAR_MAX_SIZE, type TarEntry } from '../../../src/images/tar-archive.js';

/** What GNU tar lists of an archive (`tar -tv`): the reader the engine's own matches. */
const gnuList = (archive: Buffer) => execFileSync('tar', ['-tvf', '-', '--numeric-owner'], { input: archive, encoding: 'utf8' });

/** The first `bytes` of a stream, then the stream is destroyed. */
async function head(stream: Readable, bytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
    if (length >= bytes) break;
  }
  stream.destroy();
  return Buffer.concat(chunks).subarray(0, bytes);
}

/** Zero bytes without end (never read to the end by a test). */
const zeros = () =>
  new Readable({
    read() {
      this.push(Buffer.alloc(64 * 1024));
    },
  });

const file = (path: string, content: string, mode = 0o644): TarEntry => ({ type: 'file', path, mode, content: Buffer.from(content) });

describe('tar archives', () => {
  it('round-trips files, directories, symlinks, modes and owners, in order', async () => {
    const archive = await tarArchive([
      { type: 'dir', path: 'bin', mode: 0o755 },
      { type: 'file', path: 'bin/tool', mode: 0o4755, uid: 1000, gid: 100, content: Buffer.from('#!/bin/sh\n') },
      { type: 'symlink', path: 'bin/alias', target: '/bin/tool' },
      file('Dockerfile', 'FROM x\n'),
    ]);
    const read = await readTar(archive);
    expect(read.map(({ header, content }) => [header.name, header.type, header.mode, header.uid, header.gid, header.linkname ?? null, content.toString()])).toEqual([
      ['bin/', 'directory', 0o755, 0, 0, null, ''],
      ['bin/tool', 'file', 0o4755, 1000, 100, null, '#!/bin/sh\n'],
      ['bin/alias', 'symlink', 0o777, 0, 0, '/bin/tool', ''],
      ['Dockerfile', 'file', 0o644, 0, 0, null, 'FROM x\n'],
    ]);
    expect(gnuList(archive)).toMatch(/^-rwsr-xr-x 1000\/100 +10 1970-01-01 00:00 bin\/tool$/m);
    // The same entries make the same bytes.
    expect((await tarArchive([file('a', 'x')])).equals(await tarArchive([file('a', 'x')]))).toBe(true);
  });

  it('writes paths past ustar\'s fields, and link targets, in PAX records that tar-stream and GNU tar read back', async () => {
    const split = `${'d'.repeat(90)}/${'e'.repeat(60)}/file.txt`;
    const longName = 'n'.repeat(150);
    const deep = `${'p/'.repeat(150)}file`;
    const unicode = 'données/fichier-ü.txt';
    const target = `/${'t'.repeat(200)}`;
    const archive = await tarArchive([
      file(split, 'split'),
      file(longName, 'long'),
      file(deep, 'deep'),
      file(unicode, 'ü'),
      { type: 'symlink', path: 'link', target },
    ]);
    const read = await readTar(archive);
    expect(read.map(({ header, content }) => [header.name, content.toString()])).toEqual([
      [split, 'split'],
      [longName, 'long'],
      [deep, 'deep'],
      [unicode, 'ü'],
      ['link', ''],
    ]);
    expect(read[4]!.header.linkname).toBe(target);
    expect(gnuList(archive).trim().split('\n').map((line) => line.split(/\s+/).slice(5).join(' '))).toEqual([split, longName, deep, unicode, `link -> ${target}`]);
  });

  it('writes a size past ustar\'s 8 GiB in a PAX record (the header, not the file)', async () => {
    const size = 9 * 2 ** 30;
    const path = `big/${'b'.repeat(120)}.img`;
    expect(size).toBeGreaterThan(USTAR_MAX_SIZE);
    const start = await head(tarStream([{ type: 'file', path, mode: 0o600, size, open: zeros }]), 4096);
    // The PAX header's records, then the entry's own ustar header, whose 11 octal digits cannot hold the size.
    expect(start.toString('latin1')).toContain(`size=${size}\n`);
    expect(start.toString('latin1')).toContain(`path=${path}\n`);
    const headers: tar.Headers[] = [];
    const extract = tar.extract();
    extract.on('entry', (header, stream) => {
      headers.push(header);
      stream.resume();
    });
    extract.on('error', () => undefined);
    extract.write(start);
    await new Promise((resolve) => setImmediate(resolve));
    expect(headers).toEqual([expect.objectContaining({ name: path, size, type: 'file', mode: 0o600 })]);
    extract.destroy();
  });

  it('streams a file from its source, and fails when the source gives another size than it said', async () => {
    const archive = await tarArchive([{ type: 'file', path: 'streamed', mode: 0o644, size: 3, open: () => Readable.from([Buffer.from('abc')]) }]);
    expect((await readTar(archive)).map((entry) => entry.content.toString())).toEqual(['abc']);
    await expect(tarArchive([{ type: 'file', path: 'short', mode: 0o644, size: 5, open: () => Readable.from([Buffer.from('abc')]) }])).rejects.toThrow(/size mismatch/);
  });

  it('appends entries to a read archive, keeping the read ones as they were', async () => {
    const long = `${'q'.repeat(130)}/x`;
    const archive = await tarArchive([file('Dockerfile', 'FROM x\n'), file(long, 'y'.repeat(700))]);
    const joined = await tarArchive([...(await readTar(archive)), file('more', 'm')]);
    expect((await readTar(joined)).map(({ header, content }) => [header.name, content.length])).toEqual([
      ['Dockerfile', 7],
      [long, 700],
      ['more', 1],
    ]);
  });

  it('refuses bytes that are not a tar, and one that ends inside an entry', async () => {
    await expect(readTar(Buffer.alloc(600, 65))).rejects.toThrow(/^not a tar archive \(/);
    const archive = await tarArchive([file('a', 'x'.repeat(2000))]);
    await expect(readTar(archive.subarray(0, 1024))).rejects.toThrow(/^not a tar archive \(/);
    expect(await readTar(Buffer.alloc(0))).toEqual([]);
  });

  it('finds the first regular file, from a buffer or a stream', async () => {
    const archive = await tarArchive([{ type: 'symlink', path: 'l', target: 'f' }, { type: 'dir', path: 'd', mode: 0o755 }, file('f', 'first'), file('g', 'second')]);
    expect((await firstTarFile(archive))?.toString()).toBe('first');
    expect((await firstTarFile(Readable.from([archive.subarray(0, 700), archive.subarray(700)])))?.toString()).toBe('first');
    expect(await firstTarFile(await tarArchive([{ type: 'symlink', path: 'l', target: 'f' }]))).toBeUndefined();
  });
});
