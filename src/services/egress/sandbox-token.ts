import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../support/secret-box.js';

const PREFIX = 'sbx-';
const TOKEN = /^sbx-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-([A-Za-z0-9_-]{43})$/;

/**
 * Per-sandbox tokens: `sbx-<sandbox uuid>-<HMAC-SHA256 of the uuid>` in base64url, keyed with a
 * key derived from the SecretBox key. Nothing is stored: a token is checked by computing its MAC
 * again, and it names its sandbox. A sandbox presents its token to the server's proxy port (the
 * LLM gateway's placeholder keys, the egress proxy's Proxy-Authorization); no sandbox can make
 * another's. The token is only as secret as the sandbox's environment: it grants what that
 * sandbox may do through the port, nothing else.
 */
export class SandboxTokens {
  private key: Buffer | undefined;

  constructor(private readonly secrets: SecretBox) {}

  /** The token of the sandbox with this uuid. */
  mint(sandboxUuid: string): string {
    return `${PREFIX}${sandboxUuid}-${this.mac(sandboxUuid).toString('base64url')}`;
  }

  /** The sandbox uuid a token names, or undefined for anything that is not a token this server made. */
  verify(token: string): string | undefined {
    const match = TOKEN.exec(token);
    if (!match) return undefined;
    const [, uuid = '', given = ''] = match;
    // Compared as written, in constant time (43 characters by the pattern): decoding first would
    // also take the other spellings of the last character, whose unused bits base64url ignores.
    const expected = Buffer.from(this.mac(uuid).toString('base64url'));
    const presented = Buffer.from(given);
    return presented.length === expected.length && timingSafeEqual(presented, expected) ? uuid : undefined;
  }

  private mac(uuid: string): Buffer {
    this.key ??= this.secrets.deriveKey('sandbox-token');
    return createHmac('sha256', this.key).update(uuid).digest();
  }
}

/** Whether a string looks like a sandbox token (to find and drop one, not to trust it). */
export function looksLikeToken(value: string): boolean {
  return value.startsWith(PREFIX);
}
