import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { closeSync, existsSync, fstatSync, fsyncSync, linkSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ServiceError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';

/** AES-256 takes a 32-byte key. */
export const KEY_BYTES = 32;
/** GCM's standard 96-bit nonce, random per value. */
const IV_BYTES = 12;
const TAG_BYTES = 16;
const FORMAT = 'v1';
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** The key file cannot be used. The message says what to fix; at start it ends the process (exit 2). */
export class SecretKeyError extends Error {
  override readonly name = 'SecretKeyError';

  constructor(
    readonly keyFile: string,
    message: string,
  ) {
    super(message);
  }
}

/** Why a sealed value did not open. */
export type OpenFailure = 'malformed' | 'wrong_key' | 'altered';

/**
 * A sealed value that does not open. Its code is INTERNAL: sealed values come from the server's
 * own store, never from a client, so a failure is the server's fault (a different key file, a
 * damaged or altered row, a value read for another purpose than it was sealed for), and the
 * caller can do nothing about it. `reason` tells the cases apart for the code that handles it.
 */
export class SecretOpenError extends ServiceError {
  override readonly name = 'SecretOpenError';

  constructor(
    readonly reason: OpenFailure,
    message: string,
  ) {
    super('INTERNAL', message);
  }
}

export interface SecretBoxInput {
  /** Path of the 32-byte key file. */
  keyFile: string;
  /**
   * Make the key file on first use when it does not exist: the default key in the data
   * directory. A key file the operator named must exist (a typo must not mint a new key).
   */
  create: boolean;
  logger: Logger;
}

interface LoadedKey {
  key: Buffer;
  /** A short fingerprint of the key, written into every sealed value. */
  id: string;
}

/**
 * Authenticated encryption of secrets at rest (store passwords, provider keys, sandbox secrets)
 * with AES-256-GCM. A sealed value is text, `v1.<key id>.<iv>.<ciphertext>.<tag>` in base64url,
 * so it fits a TEXT column; `aad` binds it to its purpose (say `store:<id>:password`) so that a
 * value copied to another row does not open there. The key is read, or made, on first use.
 * Plaintexts never appear in logs or errors.
 */
export class SecretBox {
  private loaded: LoadedKey | undefined;

  constructor(private readonly input: SecretBoxInput) {}

  /** Path of the key file. */
  get keyFile(): string {
    return this.input.keyFile;
  }

  /**
   * Checks the key file at start: an existing file must be a usable key, and a named one must
   * exist; a missing default key is left to be made on first use. Throws SecretKeyError.
   */
  verify(): void {
    if (this.loaded || (this.input.create && !existsSync(this.input.keyFile))) return;
    this.loaded = withId(readKeyFile(this.input.keyFile));
  }

  /** Encrypts `plaintext` (UTF-8 when a string) into the sealed text form. */
  seal(plaintext: string | Buffer, aad?: string): string {
    const { key, id } = this.key();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(associatedData(id, aad));
    const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
    const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
    return [FORMAT, id, iv.toString('base64url'), ciphertext.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  /** The UTF-8 text a value was sealed from; SecretOpenError when it does not open with this key and `aad`. */
  open(sealed: string, aad?: string): string {
    return this.openBytes(sealed, aad).toString('utf8');
  }

  /** The bytes a value was sealed from; SecretOpenError when it does not open with this key and `aad`. */
  openBytes(sealed: string, aad?: string): Buffer {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== FORMAT || !parts.slice(1).every((part) => BASE64URL.test(part))) {
      throw new SecretOpenError('malformed', `a stored secret is not a sealed value (expected ${FORMAT}.<key id>.<iv>.<ciphertext>.<tag>)`);
    }
    const [, sealedWith, ivText, ciphertextText, tagText] = parts as [string, string, string, string, string];
    const iv = Buffer.from(ivText, 'base64url');
    const tag = Buffer.from(tagText, 'base64url');
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
      throw new SecretOpenError('malformed', 'a stored secret is not a sealed value (its nonce or tag has the wrong length)');
    }
    const { key, id } = this.key();
    if (sealedWith !== id) {
      throw new SecretOpenError(
        'wrong_key',
        "a stored secret was sealed with another key than this server's: start the server with the key file that sealed it (--secret-key-file)",
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(associatedData(id, aad));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]);
    } catch {
      throw new SecretOpenError('altered', 'a stored secret failed its integrity check: it was altered, or read for another purpose than it was sealed for');
    }
  }

  /**
   * A 32-byte key for `purpose` (say `sandbox-token`), derived from the box's key with
   * HMAC-SHA256: each purpose gets a key of its own, and none of them reveals the box's key.
   */
  deriveKey(purpose: string): Buffer {
    return createHmac('sha256', this.key().key).update(`sandboxd derived key\0${purpose}`).digest();
  }

  private key(): LoadedKey {
    if (this.loaded) return this.loaded;
    const { keyFile, create, logger } = this.input;
    if (create && !existsSync(keyFile)) {
      const made = createKeyFile(keyFile);
      if (made.created) {
        logger.info({ keyFile }, 'made a secret key; keep a copy apart from backups of the data directory, or move it off it with --secret-key-file');
      }
      this.loaded = withId(made.key);
    } else {
      this.loaded = withId(readKeyFile(keyFile));
    }
    return this.loaded;
  }
}

/**
 * The box of a data directory: the key file the operator named (it must exist), else
 * `<data-dir>/secret.key`, made on first use.
 */
export function secretBoxFor(dataDir: string, keyFile: string | undefined, logger: Logger): SecretBox {
  return new SecretBox({ keyFile: keyFile ?? join(dataDir, 'secret.key'), create: keyFile === undefined, logger });
}

/** The header of a sealed value is authenticated with its purpose, so neither can be swapped. */
function associatedData(keyId: string, aad: string | undefined): Buffer {
  return Buffer.from(`${FORMAT}.${keyId}\0${aad ?? ''}`, 'utf8');
}

function withId(key: Buffer): LoadedKey {
  const id = createHash('sha256').update('sandboxd secret key id\0').update(key).digest().subarray(0, 6).toString('base64url');
  return { key, id };
}

const MAKE_KEY_HINT = (path: string) => `head -c ${KEY_BYTES} /dev/urandom > ${path} && chmod 600 ${path}`;

/**
 * Reads a key file: a regular file of exactly KEY_BYTES bytes that neither group nor others may
 * open. Throws SecretKeyError saying what to fix.
 */
export function readKeyFile(path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new SecretKeyError(path, `secret key file ${path} does not exist: make one with \`${MAKE_KEY_HINT(path)}\`, or correct --secret-key-file`);
    }
    throw new SecretKeyError(path, `cannot read secret key file ${path}: ${(err as Error).message}`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new SecretKeyError(path, `secret key file ${path} is not a regular file: point --secret-key-file at a file`);
    if ((stat.mode & 0o077) !== 0) {
      const mode = (stat.mode & 0o777).toString(8).padStart(3, '0');
      throw new SecretKeyError(path, `secret key file ${path} is open to group or others (mode ${mode}): run chmod 600 ${path}`);
    }
    if (stat.size !== KEY_BYTES) {
      throw new SecretKeyError(
        path,
        `secret key file ${path} holds ${stat.size} bytes, not ${KEY_BYTES} raw bytes: point --secret-key-file at the right file, or make a new key with \`${MAKE_KEY_HINT(path)}\` (values sealed with the old key will no longer open)`,
      );
    }
    const key = Buffer.alloc(KEY_BYTES);
    if (readSync(fd, key, 0, KEY_BYTES, 0) !== KEY_BYTES) throw new SecretKeyError(path, `secret key file ${path} changed while it was read: start again`);
    return key;
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes the key file atomically: the key is written and flushed to a private temporary file that
 * is then hard-linked to `path`. A link never replaces an existing file, so when two processes
 * race, exactly one key wins and the loser reads it. Its folder must exist.
 */
export function createKeyFile(path: string): { key: Buffer; created: boolean } {
  const key = randomBytes(KEY_BYTES);
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const fd = openSync(temp, 'wx', 0o600);
  try {
    writeSync(fd, key);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { key: readKeyFile(path), created: false };
  } finally {
    unlinkSync(temp);
  }
  syncFolder(dirname(path));
  return { key, created: true };
}

/** Flushes a folder's entries, so that a new file survives a power loss. */
function syncFolder(folder: string): void {
  const fd = openSync(folder, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
