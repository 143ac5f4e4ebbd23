import { argumentError, shown } from '../embedded/command-args.js';

/**
 * SCAN's two parts that need no database: the cursor and the MATCH glob.
 *
 * The cursor is the last key a page examined (keys are read in key order), so a key inserted
 * or deleted between two pages never makes another key appear twice or go missing: every key
 * present from the first page to the last is returned exactly once. `"0"` starts and ends a scan.
 */

/** Longest MATCH pattern, in bytes: with keys of at most MAX_KEY_BYTES it bounds a page's work. */
export const MAX_PATTERN_BYTES = 128;

const CURSOR_PREFIX = 'k';

/** The cursor that resumes after `key`. */
export const cursorAfter = (key: string): string => CURSOR_PREFIX + Buffer.from(key).toString('base64url');

/** The key a cursor resumes after; null for `"0"` (the start). 400 for anything this engine did not hand out. */
export function keyOfCursor(cursor: unknown): string | null {
  if (cursor === '0' || cursor === 0) return null;
  if (typeof cursor === 'string' && cursor.startsWith(CURSOR_PREFIX)) {
    const key = Buffer.from(cursor.slice(CURSOR_PREFIX.length), 'base64url').toString();
    if (cursorAfter(key) === cursor) return key;
  }
  throw argumentError('SCAN', `invalid cursor ${shown(cursor)} (start with "0", then pass the cursor the last page returned)`);
}

type Token = { kind: 'star' } | { kind: 'one' } | { kind: 'literal'; char: string } | { kind: 'set'; negated: boolean; items: [string, string][] };

/** A compiled MATCH pattern (Redis glob: `*`, `?`, `[abc]`, `[^a-z]`, `\` escapes the next character). */
export interface Glob {
  /** The literal characters before the first wildcard: the scan starts there and stops past them. */
  prefix: string;
  matches(key: string): boolean;
}

/** Compiles a MATCH pattern, or 400 naming what is wrong with it. */
export function compileGlob(pattern: unknown): Glob {
  if (typeof pattern !== 'string') throw argumentError('SCAN', `MATCH pattern must be a string, got ${shown(pattern)}`);
  if (Buffer.byteLength(pattern) > MAX_PATTERN_BYTES) throw argumentError('SCAN', `MATCH pattern is longer than ${MAX_PATTERN_BYTES} bytes`);
  const tokens = tokenize(Array.from(pattern));
  let prefix = '';
  for (const token of tokens) {
    if (token.kind !== 'literal') break;
    prefix += token.char;
  }
  return { prefix, matches: (key) => matchTokens(tokens, Array.from(key)) };
}

function tokenize(chars: string[]): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < chars.length; i += 1) {
    const char = chars[i] as string;
    if (char === '*') {
      // Consecutive stars match what one does; folding them keeps matching linear in them.
      if (tokens.at(-1)?.kind !== 'star') tokens.push({ kind: 'star' });
    } else if (char === '?') {
      tokens.push({ kind: 'one' });
    } else if (char === '\\' && i + 1 < chars.length) {
      i += 1;
      tokens.push({ kind: 'literal', char: chars[i] as string });
    } else if (char === '[') {
      i = readSet(chars, i + 1, tokens);
    } else {
      tokens.push({ kind: 'literal', char });
    }
  }
  return tokens;
}

/** Reads a `[...]` set starting after its `[`; returns the index of its `]`. */
function readSet(chars: string[], start: number, tokens: Token[]): number {
  let i = start;
  const negated = chars[i] === '^';
  if (negated) i += 1;
  const items: [string, string][] = [];
  for (; i < chars.length && chars[i] !== ']'; i += 1) {
    let low = chars[i] as string;
    if (low === '\\' && i + 1 < chars.length) low = chars[++i] as string;
    if (chars[i + 1] === '-' && i + 2 < chars.length && chars[i + 2] !== ']') {
      let high = chars[i + 2] as string;
      i += 2;
      if (high === '\\' && i + 1 < chars.length) high = chars[++i] as string;
      items.push(low <= high ? [low, high] : [high, low]);
    } else {
      items.push([low, low]);
    }
  }
  if (i >= chars.length) throw argumentError('SCAN', "MATCH pattern has a '[' without its ']' (escape it as '\\[')");
  tokens.push({ kind: 'set', negated, items });
  return i;
}

function matchOne(token: Exclude<Token, { kind: 'star' }>, char: string): boolean {
  switch (token.kind) {
    case 'one':
      return true;
    case 'literal':
      return token.char === char;
    case 'set':
      return token.items.some(([low, high]) => char >= low && char <= high) !== token.negated;
  }
}

/**
 * Wildcard matching without backtracking blow-up: on a mismatch it goes back only to the last
 * star, so a page costs at most (key length x pattern length) steps per key, whatever the
 * pattern (a regular expression built from `*a*a*a*b` could take exponential time).
 */
function matchTokens(tokens: Token[], chars: string[]): boolean {
  let t = 0;
  let c = 0;
  let starToken = -1;
  let starChar = 0;
  while (c < chars.length) {
    const token = tokens[t];
    if (token && token.kind === 'star') {
      starToken = t;
      starChar = c;
      t += 1;
    } else if (token && matchOne(token, chars[c] as string)) {
      t += 1;
      c += 1;
    } else if (starToken >= 0) {
      t = starToken + 1;
      starChar += 1;
      c = starChar;
    } else {
      return false;
    }
  }
  while (tokens[t]?.kind === 'star') t += 1;
  return t === tokens.length;
}
