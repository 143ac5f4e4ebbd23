import { describe, expect, it } from 'vitest';
import { capOutput, OUTPUT_CAP_BYTES } from '../../../src/mcp/output-cap.js';

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');
const MARKER = /\n\[\.\.\. (\d+) bytes omitted: the output was (\d+) bytes, of which the first and last (\d+) are shown \.\.\.\]\n/;

describe('capOutput', () => {
  it('keeps text up to 16 KB as it is', () => {
    const text = 'x'.repeat(OUTPUT_CAP_BYTES);
    expect(capOutput(text)).toBe(text);
    expect(capOutput('')).toBe('');
  });

  it('keeps the first and last 8 KB of longer text around a marker naming the bytes left out', () => {
    const text = 'a'.repeat(50_000) + 'b'.repeat(50_000);
    const capped = capOutput(text);
    const [head, tail] = capped.split(MARKER.exec(capped)![0]);
    expect(head).toBe('a'.repeat(8192));
    expect(tail).toBe('b'.repeat(8192));
    expect(MARKER.exec(capped)!.slice(1)).toEqual(['83616', '100000', '8192']);
  });

  it('never splits a multi-byte character at either cut', () => {
    // '€' is 3 bytes: at byte 8192 the head cut falls inside one, and so does the tail cut.
    const text = 'a'.repeat(8191) + '€' + 'x'.repeat(90_000) + '€' + 'b'.repeat(8190);
    const capped = capOutput(text);
    const match = MARKER.exec(capped)!;
    const [head, tail] = capped.split(match[0]);
    expect(head).toBe('a'.repeat(8191));
    expect(tail).toBe('b'.repeat(8190));
    expect(Number(match[1])).toBe(bytes(text) - 8191 - 8190);
    expect(capped).not.toContain('\uFFFD');
  });

  it('handles 4-byte characters and a custom cap', () => {
    const text = '😀'.repeat(100); // 400 bytes
    const capped = capOutput(text, 64);
    const [head, tail] = capped.split(MARKER.exec(capped)![0]);
    expect(head).toBe('😀'.repeat(8));
    expect(tail).toBe('😀'.repeat(8));
    expect(capped).not.toContain('\uFFFD');
  });
});
