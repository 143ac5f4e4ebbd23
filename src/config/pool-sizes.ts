import { PROFILES, type Profile } from '../domain/profiles.js';

/** One `[pool].sizes` entry: how many ready instances of an (image, profile) to keep. */
export interface PoolSizeEntry {
  image: string;
  profile: Profile;
  size: number;
}

/** Most ready instances of one key. */
export const MAX_POOL_SIZE = 64;

/** `image` (the moderate profile) or `image@profile`; an image may hold `@sha256:...` itself. */
function parsePoolKey(text: string): { image: string; profile: Profile } {
  const at = text.lastIndexOf('@');
  const suffix = at > 0 ? text.slice(at + 1) : '';
  if (at <= 0 || suffix.includes(':')) return { image: text, profile: 'moderate' };
  if (!(PROFILES as readonly string[]).includes(suffix)) throw new Error(`'${suffix}' in '${text}' is not a profile (${PROFILES.join(', ')})`);
  return { image: text.slice(0, at), profile: suffix as Profile };
}

function sizeOf(key: string, value: unknown): number {
  const size = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 0 || size > MAX_POOL_SIZE) {
    throw new Error(`the size of '${key}' must be an integer from 0 to ${MAX_POOL_SIZE}`);
  }
  return size;
}

/** A TOML table `{"image[@profile]" = n}` or the flag form `image[@profile]=n,...`. */
export function parsePoolSizes(input: string | Record<string, unknown>): PoolSizeEntry[] {
  const pairs =
    typeof input === 'string'
      ? input
          .split(',')
          .map((entry) => entry.trim())
          .filter(Boolean)
          .map((entry) => {
            const at = entry.lastIndexOf('=');
            if (at <= 0) throw new Error(`'${entry}' is not image[@profile]=n`);
            return [entry.slice(0, at).trim(), entry.slice(at + 1).trim()] as const;
          })
      : Object.entries(input);
  return pairs.map(([key, value]) => ({ ...parsePoolKey(key), size: sizeOf(key, value) }));
}
