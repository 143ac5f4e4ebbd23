import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeyFile, KEY_BYTES, SecretBox, secretBoxFor, SecretKeyError, SecretOpenError } from '../../../../src/services/support/secret-box.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

const root = mkdtempSync(join(tmpdir(), 'sandboxd-secrets-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => {
  const dir = join(root, String(++dirs));
  mkdirSync(dir, { mode: 0o700 });
  return dir;
};
const defaultBox = (dir: string) => secretBoxFor(dir, undefined, silentLogger());
const namedBox = (keyFile: string) => secretBoxFor('/nonexistent-data-dir', keyFile, silentLogger());

/** What opening a sealed value fails with: its reason and code, or 'opened'. */
function failure(box: SecretBox, sealed: string, aad?: string): string {
  try {
    box.open(sealed, aad);
    return 'opened';
  } catch (err) {
    expect(err).toBeInstanceOf(SecretOpenError);
    return `${(err as SecretOpenError).reason} ${(err as SecretOpenError).code}`;
  }
}

/** `sealed` with one base64url character of part `index` changed. */
function alter(sealed: string, index: number): string {
  const parts = sealed.split('.');
  const part = parts[index]!;
  parts[index] = (part[0] === 'A' ? 'B' : 'A') + part.slice(1);
  return parts.join('.');
}

describe('SecretBox', () => {
  it('seals to versioned text that opens to the same string or bytes, never twice the same', () => {
    const box = defaultBox(freshDir());
    const sealed = box.seal('hunter2', 'store:abc:password');
    expect(sealed).toMatch(/^v1\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(sealed).not.toContain('hunter2');
    expect(box.open(sealed, 'store:abc:password')).toBe('hunter2');
    expect(box.seal('hunter2', 'store:abc:password')).not.toBe(sealed);

    const bytes = Buffer.from([0, 255, 1, 254]);
    expect(box.openBytes(box.seal(bytes))).toEqual(bytes);
    expect(box.open(box.seal(''))).toBe('');
    expect(box.open(box.seal('päss wörd ✓'))).toBe('päss wörd ✓');
  });

  it('makes <data-dir>/secret.key (0600, 32 bytes) on first use, not at start, and reads it back later', () => {
    const dir = freshDir();
    const keyFile = join(dir, 'secret.key');
    const box = defaultBox(dir);
    box.verify();
    expect(existsSync(keyFile)).toBe(false);
    const sealed = box.seal('s3cret');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFile)).toHaveLength(KEY_BYTES);
    expect(readdirSync(dir)).toEqual(['secret.key']);

    // A restart: a new box over the same file.
    const again = defaultBox(dir);
    again.verify();
    expect(again.open(sealed)).toBe('s3cret');
  });

  it('keeps the key that won when another process made the key file first', () => {
    const dir = freshDir();
    const keyFile = join(dir, 'secret.key');
    const winner = createKeyFile(keyFile);
    expect(winner.created).toBe(true);
    const loser = createKeyFile(keyFile);
    expect(loser).toEqual({ key: winner.key, created: false });
    expect(readFileSync(keyFile)).toEqual(winner.key);
    expect(readdirSync(dir)).toEqual(['secret.key']);
  });

  it('uses a key file given by --secret-key-file, outside the data directory', () => {
    const keyFile = join(freshDir(), 'sandboxd.key');
    writeFileSync(keyFile, Buffer.alloc(KEY_BYTES, 7), { mode: 0o600 });
    const box = namedBox(keyFile);
    box.verify();
    const sealed = box.seal('token');
    expect(namedBox(keyFile).open(sealed)).toBe('token');
    expect(readFileSync(keyFile)).toEqual(Buffer.alloc(KEY_BYTES, 7));
  });

  it('refuses a tampered value, a wrong purpose and a wrong key with INTERNAL and a reason', () => {
    const box = defaultBox(freshDir());
    const sealed = box.seal('hunter2', 'store:abc:password');
    expect(failure(box, alter(sealed, 3), 'store:abc:password')).toBe('altered INTERNAL');
    expect(failure(box, alter(sealed, 4), 'store:abc:password')).toBe('altered INTERNAL');
    expect(failure(box, alter(sealed, 2), 'store:abc:password')).toBe('altered INTERNAL');
    expect(failure(box, sealed, 'store:xyz:password')).toBe('altered INTERNAL');
    expect(failure(box, sealed)).toBe('altered INTERNAL');
    expect(failure(box, alter(sealed, 1), 'store:abc:password')).toBe('wrong_key INTERNAL');
    expect(failure(defaultBox(freshDir()), sealed, 'store:abc:password')).toBe('wrong_key INTERNAL');
    for (const malformed of ['', 'hunter2', sealed.replace('v1.', 'v2.'), `${sealed}.x`, sealed.replace(/\.[^.]+$/, '.!!'), sealed.replace(/\.[^.]+$/, '.AAAA')]) {
      expect(failure(box, malformed), malformed).toBe('malformed INTERNAL');
    }
  });

  it('never puts the plaintext in an error message', () => {
    const box = defaultBox(freshDir());
    const sealed = box.seal('hunter2');
    expect(() => box.open(sealed, 'other')).toThrow(SecretOpenError);
    try {
      box.open(sealed, 'other');
    } catch (err) {
      expect(String((err as Error).message)).not.toContain('hunter2');
    }
  });

  it.each([
    ['open to group or others', 0o640, KEY_BYTES, /is open to group or others \(mode 640\): run chmod 600 /],
    ['open to others', 0o604, KEY_BYTES, /\(mode 604\): run chmod 600 /],
    ['too short', 0o600, KEY_BYTES - 1, /holds 31 bytes, not 32 raw bytes: point --secret-key-file at the right file, or make a new key with `head -c 32 \/dev\/urandom > /],
    ['hex text', 0o600, 2 * KEY_BYTES + 1, /holds 65 bytes, not 32 raw bytes/],
  ])('refuses a key file that is %s at start, saying what to fix', (_, mode, size, message) => {
    for (const [keyFile, box] of [
      [join(freshDir(), 'given.key'), (path: string) => namedBox(path)],
      [join(freshDir(), 'secret.key'), (path: string) => defaultBox(join(path, '..'))],
    ] as const) {
      writeFileSync(keyFile, Buffer.alloc(size, 1));
      chmodSync(keyFile, mode);
      expect(() => box(keyFile).verify()).toThrow(SecretKeyError);
      expect(() => box(keyFile).verify()).toThrow(message);
      expect(() => box(keyFile).seal('x')).toThrow(message);
    }
  });

  it('refuses a named key file that does not exist or is a folder, and makes none', () => {
    const missing = join(freshDir(), 'typo.key');
    expect(() => namedBox(missing).verify()).toThrow(
      new RegExp(`secret key file ${missing} does not exist: make one with \`head -c 32 /dev/urandom > ${missing} && chmod 600 ${missing}\`, or correct --secret-key-file`),
    );
    expect(() => namedBox(missing).seal('x')).toThrow(SecretKeyError);
    expect(existsSync(missing)).toBe(false);
    const folder = freshDir();
    expect(() => namedBox(folder).verify()).toThrow(/is not a regular file: point --secret-key-file at a file/);
  });
});
