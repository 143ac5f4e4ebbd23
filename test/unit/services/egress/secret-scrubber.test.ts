import { describe, expect, it } from 'vitest';
import { echoForms, scrubHeader, SecretScrubber } from '../../../../src/services/egress/secret-scrubber.js';

const VALUE = 'tok-"VALUE"/é-42';
const PLACEHOLDER = 'sbx-secret-AAAAAAAAAAAAAAAAAAAAAAAA';

/** Pushes `text` cut at `cuts` through a new scrubber and returns all it let out. */
function through(text: string, cuts: number[], replacements = echoForms(VALUE, PLACEHOLDER)): string {
  const scrubber = new SecretScrubber(replacements);
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(scrubber.push(bytes.subarray(at, cut)));
    at = cut;
  }
  out.push(scrubber.flush());
  return Buffer.concat(out).toString();
}

describe('SecretScrubber', () => {
  const text = `a ${VALUE} b ${JSON.stringify({ v: VALUE })} c ${encodeURIComponent(VALUE)} ${VALUE}`;
  const expected = `a ${PLACEHOLDER} b ${JSON.stringify({ v: PLACEHOLDER })} c ${encodeURIComponent(PLACEHOLDER)} ${PLACEHOLDER}`;

  it('replaces every form of the value by the same form of the placeholder, whole', () => {
    expect(through(text, [])).toBe(expected);
  });

  it('replaces a value cut anywhere, at every byte, and in one-byte chunks', () => {
    const length = Buffer.byteLength(text);
    for (let cut = 1; cut < length; cut++) expect(through(text, [cut])).toBe(expected);
    expect(through(text, Array.from({ length: length - 1 }, (_, i) => i + 1))).toBe(expected);
  });

  it('holds back only what could begin a value, and gives a held beginning back at the end', () => {
    const scrubber = new SecretScrubber(echoForms(VALUE, PLACEHOLDER));
    expect(scrubber.push(Buffer.from('data: {"x": 1}\n\n')).toString()).toBe('data: {"x": 1}\n\n');
    expect(scrubber.push(Buffer.from('end tok-')).toString()).toBe('end ');
    expect(scrubber.flush().toString()).toBe('tok-');
  });

  it('leaves text without a value as it is, and scrubs header values', () => {
    expect(through('nothing to see', [3, 7])).toBe('nothing to see');
    expect(scrubHeader([`Bearer ${VALUE}`, 'x'], echoForms(VALUE, PLACEHOLDER))).toEqual([`Bearer ${PLACEHOLDER}`, 'x']);
  });
});
