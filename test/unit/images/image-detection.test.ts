import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load-config.js';
import { DEFAULT_IMAGE_DETECTION, detectImage, parseImageDetection } from '../../../src/images/image-detection.js';

describe('image detection', () => {
  it('uses the basename of argv[0] only', () => {
    expect(detectImage(['python3', 'x.py'], DEFAULT_IMAGE_DETECTION)).toBe('sandboxd/python:bookworm');
    expect(detectImage(['/usr/local/bin/npx', 'tsc'], DEFAULT_IMAGE_DETECTION)).toBe('sandboxd/node:bookworm');
    expect(detectImage(['bash', '-c', 'python3 x.py'], DEFAULT_IMAGE_DETECTION)).toBe('sandboxd/base:bookworm');
    expect(detectImage(['make'], DEFAULT_IMAGE_DETECTION)).toBeUndefined();
    expect(detectImage(['constructor'], DEFAULT_IMAGE_DETECTION)).toBeUndefined();
  });

  it('reads the table from the flag form and refuses a malformed one, naming the option', () => {
    expect(parseImageDetection('ruby=ruby:3, go = golang:1')).toEqual({ ruby: 'ruby:3', go: 'golang:1' });
    expect(loadConfig({ env: {}, flags: { dataDir: '/tmp/x', imageDetection: 'ruby=ruby:3' } }).imageDetection).toEqual({ ruby: 'ruby:3' });
    expect(() => loadConfig({ env: { SERVICE_IMAGE_DETECTION: 'ruby' }, flags: { dataDir: '/tmp/x' } })).toThrow(/imageDetection|image-detection|IMAGE_DETECTION/);
  });
});
