import type { OutputChunk } from './backend.js';

/** Default cap on the output one exec keeps (stdout + stderr together). */
export const DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024;

/**
 * Keeps an exec's output in arrival order, stdout and stderr apart and interleaved, up to a
 * byte cap. Chunks past the cap are dropped (and `truncated` is set) but still counted, so
 * a runaway writer costs the server no memory.
 */
export class OutputCollector {
  private readonly chunks: OutputChunk[] = [];
  private kept = 0;
  truncated = false;

  constructor(
    private readonly maxBytes = DEFAULT_MAX_OUTPUT_BYTES,
    private readonly onOutput?: (chunk: OutputChunk) => void,
  ) {}

  push(chunk: OutputChunk): void {
    if (chunk.data.length === 0) return;
    this.onOutput?.(chunk);
    const room = this.maxBytes - this.kept;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const data = chunk.data.length > room ? chunk.data.subarray(0, room) : chunk.data;
    if (data !== chunk.data) this.truncated = true;
    this.chunks.push({ stream: chunk.stream, data });
    this.kept += data.length;
  }

  /** The kept output, decoded as UTF-8 (invalid sequences become U+FFFD). */
  result(): { stdout: string; stderr: string; output: string; truncated: boolean } {
    const pick = (stream?: OutputChunk['stream']) =>
      Buffer.concat(this.chunks.filter((c) => !stream || c.stream === stream).map((c) => c.data)).toString('utf8');
    return { stdout: pick('stdout'), stderr: pick('stderr'), output: pick(), truncated: this.truncated };
  }
}
