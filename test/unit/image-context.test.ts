import { describe, expect, it } from 'vitest';
import { baseImages } from '../../src/images/dockerfile.js';
import { tarArchive, tarEntries } from '../../src/images/tar-archive.js';

describe('baseImages', () => {
  it('lists the FROM images that are neither scratch nor an earlier stage, once each', () => {
    const dockerfile = [
      '# a comment naming FROM nothing',
      'FROM --platform=linux/amd64 sandboxd/base:bookworm AS build',
      'RUN make \\',
      '  FROM-looking-arg',
      'from build as test',
      'FROM scratch',
      'FROM sandboxd/node:bookworm',
      'FROM sandboxd/base:bookworm',
    ].join('\n');
    expect(baseImages(dockerfile)).toEqual(['sandboxd/base:bookworm', 'sandboxd/node:bookworm']);
  });

  it('keeps a build argument as written, for the caller to refuse', () => {
    expect(baseImages('ARG B\nFROM $B\n')).toEqual(['$B']);
  });
});

describe('tar archives', () => {
  it('round-trips entries, long paths through the ustar prefix, and finds where to append', () => {
    const long = `${'d'.repeat(90)}/${'e'.repeat(60)}/file.txt`;
    const archive = tarArchive([
      { type: 'file', path: 'Dockerfile', mode: 0o644, content: Buffer.from('FROM x\n') },
      { type: 'file', path: long, mode: 0o644, content: Buffer.alloc(700, 7) },
    ]);
    const { entries, end } = tarEntries(archive);
    expect(entries.map((e) => [e.path, e.size])).toEqual([
      ['Dockerfile', 7],
      [long, 700],
    ]);
    expect(archive.toString('utf8', entries[0]!.offset, entries[0]!.offset + 7)).toBe('FROM x\n');
    expect(end).toBe(archive.length - 1024);
    const joined = Buffer.concat([archive.subarray(0, end), tarArchive([{ type: 'file', path: 'more', mode: 0o644, content: Buffer.from('m') }])]);
    expect(tarEntries(joined).entries.map((e) => e.path)).toEqual(['Dockerfile', long, 'more']);
  });

  it('refuses bytes that are not a tar, and a path ustar cannot hold', () => {
    expect(() => tarEntries(Buffer.alloc(600, 65))).toThrow(/not a tar archive/);
    expect(() => tarArchive([{ type: 'file', path: 'x'.repeat(120), mode: 0o644, content: Buffer.alloc(0) }])).toThrow(/too long for ustar/);
  });
});
