import { StringDecoder } from 'node:string_decoder';

/** Token counts and model of one answer, as the provider reported them. */
export interface MeteredUsage {
  input?: number;
  output?: number;
  model?: string;
}

/** The most of a JSON answer kept to read its usage; a larger one passes through unmetered. */
const MAX_JSON_BYTES = 16 * 1024 * 1024;
/** The most of one server-sent event kept while waiting for its end. */
const MAX_EVENT_CHARS = 4 * 1024 * 1024;
/** The end of a server-sent event: a blank line, with any of the three line endings. */
const EVENT_END = /\r\n\r\n|\n\n|\r\r/g;

const count = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined);
const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/**
 * The usage one JSON value (an answer, or the data of one event) reports, in any of the formats:
 * OpenAI Chat (`usage.prompt_tokens/completion_tokens`), OpenAI Responses (`usage.input_tokens/
 * output_tokens`, in streams inside `response.completed`'s `response`), Anthropic (`usage`, in
 * streams `message_start`'s `message.usage` and `message_delta`'s `usage`), Gemini
 * (`usageMetadata`, whose thinking tokens are output tokens as billed).
 */
export function usageOf(value: unknown): MeteredUsage {
  const body = record(value);
  if (!body) return {};
  const found: MeteredUsage = {};
  const model = body.model ?? body.modelVersion ?? record(body.response)?.model ?? record(body.message)?.model;
  if (typeof model === 'string' && model !== '') found.model = model;
  const usage = record(body.usage) ?? record(record(body.response)?.usage) ?? record(record(body.message)?.usage);
  if (usage) {
    const input = count(usage.prompt_tokens) ?? count(usage.input_tokens);
    const output = count(usage.completion_tokens) ?? count(usage.output_tokens);
    if (input !== undefined) found.input = input;
    if (output !== undefined) found.output = output;
  }
  const gemini = record(body.usageMetadata);
  if (gemini) {
    const input = count(gemini.promptTokenCount);
    const candidates = count(gemini.candidatesTokenCount);
    const thoughts = count(gemini.thoughtsTokenCount);
    if (input !== undefined) found.input = input;
    if (candidates !== undefined || thoughts !== undefined) found.output = (candidates ?? 0) + (thoughts ?? 0);
  }
  return found;
}

/**
 * An OpenAI Chat chunk that only reports usage: the last chunk a stream carries when
 * `stream_options.include_usage` is set, with empty `choices`.
 */
function isUsageOnlyChunk(value: unknown): boolean {
  const body = record(value);
  return body !== undefined && Array.isArray(body.choices) && body.choices.length === 0 && record(body.usage) !== undefined;
}

/** The data of one server-sent event (its `data:` lines joined), or undefined for an event without data. */
function eventData(block: string): string | undefined {
  const lines = block.split(/\r\n|\r|\n/).filter((line) => line.startsWith('data:'));
  if (lines.length === 0) return undefined;
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}

export interface MeterOptions {
  /** The answer's content type: JSON and server-sent events are read; anything else passes unmetered. */
  contentType: string;
  /**
   * Drop OpenAI's usage-only chunk from the stream: set when the gateway asked for it (the
   * client did not), so that the client sees the stream it asked for (no chunk with empty `choices`).
   */
  stripUsageChunk: boolean;
}

/**
 * Reads the usage of an answer as it streams through, without holding it up: each chunk is
 * handed on as it came, except that, when `stripUsageChunk` is set, server-sent events are
 * handed on whole (one event at a time) so that the injected usage chunk can be left out.
 * The latest counts win (streams report cumulative counts); an input count of 0 does not hide
 * an earlier one (Anthropic's `message_delta` may carry input_tokens 0).
 */
export class UsageMeter {
  private readonly usage: MeteredUsage = {};
  private readonly mode: 'json' | 'sse' | 'none';
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private json: Buffer[] = [];
  private jsonBytes = 0;
  /** Whether the answer was too large or malformed to read all of it. */
  private lost = false;

  constructor(private readonly options: MeterOptions) {
    const type = options.contentType.replace(/;.*$/s, '').trim().toLowerCase();
    this.mode = type === 'text/event-stream' ? 'sse' : type === 'application/json' || type.endsWith('+json') ? 'json' : 'none';
  }

  /** The bytes to send on now for `chunk`. */
  push(chunk: Buffer): Buffer {
    if (this.mode === 'json') {
      this.jsonBytes += chunk.length;
      if (this.jsonBytes <= MAX_JSON_BYTES) this.json.push(chunk);
      else this.json = [];
      return chunk;
    }
    if (this.mode !== 'sse') return chunk;
    this.pending += this.decoder.write(chunk);
    const strip = this.options.stripUsageChunk;
    const out: string[] = [];
    let start = 0;
    for (const match of this.pending.matchAll(EVENT_END)) {
      const end = match.index + match[0].length;
      const block = this.pending.slice(start, end);
      if (this.readEvent(block) || !strip) out.push(block);
      start = end;
    }
    this.pending = this.pending.slice(start);
    if (this.pending.length > MAX_EVENT_CHARS) {
      // No event ends: not a stream worth reading. Hand it on and stop holding anything.
      this.lost = true;
      out.push(this.pending);
      this.pending = '';
    }
    if (!strip) return chunk;
    return Buffer.from(out.join(''), 'utf8');
  }

  /** The bytes still held (a last event without its blank line), to send before the end. */
  flush(): Buffer {
    if (this.mode !== 'sse') return Buffer.alloc(0);
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    if (rest.trim() !== '') this.readEvent(rest);
    return this.options.stripUsageChunk ? Buffer.from(rest, 'utf8') : Buffer.alloc(0);
  }

  /** What the answer reported; undefined when it reported no token counts. */
  result(): MeteredUsage | undefined {
    if (this.mode === 'json' && this.json.length > 0) {
      try {
        const parsed: unknown = JSON.parse(Buffer.concat(this.json).toString('utf8'));
        // Gemini's streamGenerateContent without alt=sse answers a JSON array of chunks.
        for (const item of Array.isArray(parsed) ? parsed : [parsed]) this.add(usageOf(item));
      } catch {
        this.lost = true;
      }
      this.json = [];
    }
    return this.usage.input === undefined && this.usage.output === undefined ? undefined : { ...this.usage };
  }

  /** Whether part of the answer could not be read (counts may be missing). */
  get incomplete(): boolean {
    return this.lost;
  }

  /** Reads one event; false when it is the usage-only chunk (to strip). */
  private readEvent(block: string): boolean {
    const data = eventData(block);
    if (data === undefined || data.trim() === '[DONE]') return true;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      return true;
    }
    this.add(usageOf(value));
    return !isUsageOnlyChunk(value);
  }

  private add(found: MeteredUsage): void {
    if (found.input !== undefined && (found.input > 0 || this.usage.input === undefined)) this.usage.input = found.input;
    if (found.output !== undefined) this.usage.output = found.output;
    if (found.model !== undefined) this.usage.model ??= found.model;
  }
}
