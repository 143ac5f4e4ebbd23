import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../support/secret-box.js';

/** A signature is an HMAC-SHA256 in base64url: 43 characters. */
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;
const EXPIRY = /^[0-9]{1,12}$/;

/** What a presented grant is: good, not one this server made for this port, or past its expiry. */
export type GrantCheck = 'valid' | 'invalid' | 'expired';

/**
 * Signed preview grants: `sig` = HMAC-SHA256(key, "<sandbox uuid>\n<port>\n<exp>") in base64url,
 * keyed with a key derived from the SecretBox key for this purpose alone. Binding the uuid (not
 * the name) means a sandbox deleted and made again under the same name does not accept old URLs.
 * Nothing is stored: a grant is checked by computing its MAC again.
 */
export class PreviewSigner {
  private key: Buffer | undefined;

  constructor(private readonly secrets: SecretBox) {}

  /** The signature of a grant to `port` of the sandbox `uuid` until `exp` (Unix seconds). */
  sign(uuid: string, port: number, exp: number): string {
    this.key ??= this.secrets.deriveKey('preview-url');
    return createHmac('sha256', this.key).update(`${uuid}\n${port}\n${exp}`).digest('base64url');
  }

  /** Checks a presented `exp` and `sig` (as text, as they came) at `nowSeconds`. */
  check(uuid: string, port: number, exp: string, sig: string, nowSeconds: number): GrantCheck {
    if (!EXPIRY.test(exp) || !SIGNATURE.test(sig)) return 'invalid';
    // Compared as text: base64url's last character carries spare bits, so two spellings decode to
    // the same bytes; only the one this server writes is accepted. Equal lengths by the pattern.
    const expected = Buffer.from(this.sign(uuid, port, Number(exp)), 'latin1');
    if (!timingSafeEqual(Buffer.from(sig, 'latin1'), expected)) return 'invalid';
    return Number(exp) > nowSeconds ? 'valid' : 'expired';
  }
}
