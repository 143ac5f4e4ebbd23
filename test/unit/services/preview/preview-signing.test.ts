import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PreviewSigner } from '../../../../src/services/preview/index.js';
import { secretBoxFor } from '../../../../src/services/support/secret-box.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

const UUID = '0190e6a0-0000-7000-8000-000000000001';
const signer = () => new PreviewSigner(secretBoxFor(mkdtempSync(join(tmpdir(), 'sandboxd-preview-')), undefined, silentLogger()));

describe('PreviewSigner', () => {
  it('accepts its own signature until the expiry, for that sandbox and port only', () => {
    const s = signer();
    const sig = s.sign(UUID, 8000, 2_000);
    expect(sig).toMatch(/^[\w-]{43}$/);
    expect(s.check(UUID, 8000, '2000', sig, 1_999)).toBe('valid');
    expect(s.check(UUID, 8000, '2000', sig, 2_000)).toBe('expired');
    expect(s.check(UUID, 8001, '2000', sig, 1_999)).toBe('invalid');
    expect(s.check(UUID.replace(/1$/, '2'), 8000, '2000', sig, 1_999)).toBe('invalid');
    expect(s.check(UUID, 8000, '2001', sig, 1_999)).toBe('invalid');
    expect(s.check(UUID, 8000, 'x', sig, 1_999)).toBe('invalid');
    expect(s.check(UUID, 8000, '2000', `${sig}=`, 1_999)).toBe('invalid');
    // Another server's key signs differently.
    expect(signer().check(UUID, 8000, '2000', sig, 1_999)).toBe('invalid');
  });

  it('refuses every other spelling of the last character, though some decode to the same bytes', () => {
    const s = signer();
    const sig = s.sign(UUID, 8000, 2_000);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (const last of alphabet.replace(sig.at(-1)!, '')) expect(s.check(UUID, 8000, '2000', `${sig.slice(0, -1)}${last}`, 1_999)).toBe('invalid');
  });
});
