/** Most bytes of text one tool result block carries (docs/decisions.md, "MCP"). */
export const OUTPUT_CAP_BYTES = 16 * 1024;

/**
 * Text cut to fit `capBytes` of UTF-8: the first half, a marker naming how many bytes were
 * left out, and the last half. Cuts fall on character boundaries, so a multi-byte character
 * at a cut is dropped whole rather than split (each half may be up to 3 bytes short).
 */
export function capOutput(text: string, capBytes: number = OUTPUT_CAP_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= capBytes) return text;
  const half = Math.floor(capBytes / 2);
  let headEnd = half;
  while (headEnd > 0 && isContinuation(bytes[headEnd])) headEnd--;
  let tailStart = bytes.length - half;
  while (tailStart < bytes.length && isContinuation(bytes[tailStart])) tailStart++;
  const omitted = tailStart - headEnd;
  return (
    bytes.subarray(0, headEnd).toString('utf8') +
    `\n[... ${omitted} bytes omitted: the output was ${bytes.length} bytes, of which the first and last ${half} are shown ...]\n` +
    bytes.subarray(tailStart).toString('utf8')
  );
}

/** Whether `byte` continues a UTF-8 character (10xxxxxx); false past the end. */
const isContinuation = (byte: number | undefined): boolean => byte !== undefined && (byte & 0xc0) === 0x80;
