/**
 * Masks a secret in a byte stream with as many `*`, so that an upstream that echoes the key it
 * was sent (a misconfigured OpenAI-compatible server, a debugging proxy) does not hand it to the
 * sandbox; the length is kept, so a Content-Length stays true. Bytes are held back only while
 * the end of what came so far could begin the secret (never for the usual ends of JSON and SSE).
 */
export class KeyScrubber {
  private readonly secret: Buffer;
  private held: Buffer = Buffer.alloc(0);

  constructor(secret: string) {
    this.secret = Buffer.from(secret, 'utf8');
  }

  /** The bytes to send on now. */
  push(chunk: Buffer): Buffer {
    if (this.secret.length === 0) return chunk;
    const data = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : Buffer.from(chunk);
    for (let at = data.indexOf(this.secret); at !== -1; at = data.indexOf(this.secret, at + this.secret.length)) {
      data.fill('*', at, at + this.secret.length);
    }
    const keep = this.partialAtEnd(data);
    this.held = Buffer.from(data.subarray(data.length - keep));
    return data.subarray(0, data.length - keep);
  }

  /** What is held at the end of the stream (a prefix of the secret, not the secret). */
  flush(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return rest;
  }

  /** The length of the longest end of `data` that is a proper beginning of the secret. */
  private partialAtEnd(data: Buffer): number {
    for (let length = Math.min(this.secret.length - 1, data.length); length > 0; length--) {
      if (data.subarray(data.length - length).equals(this.secret.subarray(0, length))) return length;
    }
    return 0;
  }
}
