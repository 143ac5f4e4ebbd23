import { describe, expect, it } from 'vitest';
import { baseImages } from '../../../src/images/dockerfile.js';

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
