/** One text to replace in what goes back to a sandbox, and what replaces it. */
export interface Replacement {
  from: string;
  to: string;
}

interface Pattern {
  from: Buffer;
  to: Buffer;
}

/**
 * Replaces secret values by their placeholders in a byte stream (an upstream's answer on its
 * way back to the sandbox), also where a value is split across chunks. Nothing is buffered
 * but the end of what came so far that could begin a value, so a stream keeps streaming.
 */
export class SecretScrubber {
  private readonly patterns: Pattern[];
  private readonly longest: number;
  private held: Buffer = Buffer.alloc(0);

  constructor(replacements: readonly Replacement[]) {
    this.patterns = replacements
      .filter((r) => r.from.length > 0 && r.from !== r.to)
      .map((r) => ({ from: Buffer.from(r.from, 'utf8'), to: Buffer.from(r.to, 'utf8') }))
      // Longest first: where two begin at the same byte, the longer is replaced.
      .sort((a, b) => b.from.length - a.from.length);
    this.longest = this.patterns.reduce((max, p) => Math.max(max, p.from.length), 0);
  }

  /** Whether there is anything to replace at all. */
  get active(): boolean {
    return this.patterns.length > 0;
  }

  /** The bytes to send on now. */
  push(chunk: Buffer): Buffer {
    if (!this.active) return chunk;
    const data = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk;
    return this.scan(data, false);
  }

  /** What is held at the end of the stream (never a whole value). */
  flush(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return rest.length > 0 ? this.scan(rest, true) : rest;
  }

  private scan(data: Buffer, final: boolean): Buffer {
    const out: Buffer[] = [];
    let at = 0;
    for (;;) {
      const found = this.next(data, at);
      const partial = final ? -1 : this.partialFrom(data, at);
      if (partial !== -1 && (!found || partial <= found.index)) {
        out.push(data.subarray(at, partial));
        this.held = Buffer.from(data.subarray(partial));
        return Buffer.concat(out);
      }
      if (!found) {
        out.push(data.subarray(at));
        this.held = Buffer.alloc(0);
        return Buffer.concat(out);
      }
      out.push(data.subarray(at, found.index), found.pattern.to);
      at = found.index + found.pattern.from.length;
    }
  }

  /** The first whole value at or after `from` (the longest where several begin at one byte). */
  private next(data: Buffer, from: number): { index: number; pattern: Pattern } | undefined {
    let best: { index: number; pattern: Pattern } | undefined;
    for (const pattern of this.patterns) {
      const index = data.indexOf(pattern.from, from);
      if (index !== -1 && (!best || index < best.index)) best = { index, pattern };
    }
    return best;
  }

  /** The first byte at or after `from` where the rest of `data` is a proper beginning of a value; -1 when none. */
  private partialFrom(data: Buffer, from: number): number {
    for (let start = Math.max(from, data.length - this.longest + 1); start < data.length; start++) {
      const rest = data.subarray(start);
      if (this.patterns.some((p) => p.from.length > rest.length && p.from[0] === rest[0] && p.from.subarray(0, rest.length).equals(rest))) return start;
    }
    return -1;
  }
}

/** A header value (or each of a list) with every value replaced. */
export function scrubHeader(value: string | string[] | undefined, replacements: readonly Replacement[]): string | string[] | undefined {
  const scrub = (text: string) => replacements.reduce((out, r) => out.replaceAll(r.from, r.to), text);
  if (typeof value === 'string') return scrub(value);
  return Array.isArray(value) ? value.map(scrub) : value;
}

/**
 * The forms in which an upstream that echoes a value may send it back: as it was sent, escaped
 * in a JSON string (also with `\/`) and percent-encoded; each is replaced by the same form of
 * the placeholder.
 */
export function echoForms(value: string, placeholder: string): Replacement[] {
  const json = (text: string) => JSON.stringify(text).slice(1, -1);
  const forms: Replacement[] = [
    { from: value, to: placeholder },
    { from: json(value), to: json(placeholder) },
    { from: json(value).replaceAll('/', '\\/'), to: json(placeholder) },
    { from: encodeURIComponent(value), to: encodeURIComponent(placeholder) },
  ];
  return forms.filter((form, index) => forms.findIndex((f) => f.from === form.from) === index);
}
