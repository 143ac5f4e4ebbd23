import { StringDecoder } from 'node:string_decoder';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import { isServiceError } from '../errors.js';
import { httpMessage } from './errors.js';
import { SseStream } from './sse-stream.js';

/** Output a client may leave unread before it is cut off (and its command killed). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/** A chunk of a command's output as the services pass it on. */
interface OutputChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

/** What a streamed command reports at its end. */
interface CommandEnd {
  exit_code: number | null;
  duration_ms: number;
  timed_out: boolean;
  truncated: boolean;
  oom_killed?: boolean;
}

/** How the command reports to the stream while it runs. */
export interface CommandStreamEvents {
  /** Aborted when the client goes away: the command is killed. */
  signal: AbortSignal;
  send(event: string, data: object): void;
  /** Sends one output chunk as `output` {content, stream, ...extra}, decoded per stream. */
  onOutput(chunk: OutputChunk): void;
}

/** An open Server-Sent Events reply: `send` numbers the events; `gone` aborts when the client leaves. */
export interface EventReply {
  stream: SseStream;
  gone: AbortController;
  send(event: string, data: object): void;
}

/** Hijacks the reply into a Server-Sent Events stream with a heartbeat (the caller refused bad requests before). */
export function openEventStream(reply: FastifyReply, heartbeatMs: number): EventReply {
  reply.hijack();
  const stream = new SseStream(reply.raw, { heartbeatMs, maxBufferedBytes: MAX_BUFFERED_BYTES, onSlowClient: () => undefined });
  const gone = new AbortController();
  stream.onClose(() => gone.abort());
  let id = 0;
  return { stream, gone, send: (event, data) => stream.send(++id, event, JSON.stringify(data)) };
}

/**
 * A command streamed as Server-Sent Events (`/sandboxes/{name}/exec/stream`, `/run/stream`):
 * `output` events as it prints (a chunk may end inside a multi-byte character, so each stream
 * keeps its own decoder), then `done` with the result or `error` with the message, and a
 * heartbeat meanwhile. The reply is hijacked; the caller has refused bad requests before.
 */
export async function streamCommand(
  reply: FastifyReply,
  log: FastifyBaseLogger,
  { heartbeatMs, what, outputExtra }: { heartbeatMs: number; what: string; outputExtra?: (content: string) => object },
  run: (events: CommandStreamEvents) => Promise<CommandEnd>,
): Promise<void> {
  const { stream, gone, send } = openEventStream(reply, heartbeatMs);
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  const onOutput = ({ stream: which, data }: OutputChunk) => {
    const content = decoders[which].write(data);
    if (content) send('output', { content, stream: which, ...outputExtra?.(content) });
  };
  try {
    const { exit_code, duration_ms, timed_out, truncated, oom_killed } = await run({ signal: gone.signal, send, onOutput });
    send('done', { exit_code, duration_ms, timed_out, truncated, ...(oom_killed ? { oom_killed } : {}) });
  } catch (err) {
    if (!isServiceError(err)) log.error({ err }, `streamed ${what} failed`);
    send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error' });
  }
  stream.end();
}
