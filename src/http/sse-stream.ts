import type { ServerResponse } from 'node:http';

export interface SseStreamOptions {
  /** A comment line is sent this often so that proxies and clients see the stream alive. */
  heartbeatMs: number;
  /** Bytes the socket may hold unsent before the client counts as too slow and is dropped. */
  maxBufferedBytes: number;
  /** Called once when the client is dropped for reading too slowly. */
  onSlowClient: () => void;
}

/**
 * One Server-Sent Events response. Writes never wait: when the client reads slower than
 * events arrive and more than `maxBufferedBytes` pile up unsent, the connection is cut
 * (the client may reconnect with Last-Event-ID), so a slow client costs the server a bounded
 * buffer and never slows anyone else.
 */
export class SseStream {
  private readonly heartbeat: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly response: ServerResponse,
    private readonly options: SseStreamOptions,
  ) {
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx and similar proxies would otherwise buffer the stream.
      'x-accel-buffering': 'no',
    });
    this.heartbeat = setInterval(() => this.comment('heartbeat'), options.heartbeatMs);
    this.heartbeat.unref();
    response.once('close', () => this.stop());
  }

  /** Whether the stream still writes (the client is connected and not dropped). */
  get open(): boolean {
    return !this.closed;
  }

  /** One event: `id`, `event` and `data` lines, then a blank line. `data` is one JSON line. */
  send(id: number, event: string, data: string): void {
    this.write(`id: ${id}\nevent: ${event}\ndata: ${data}\n\n`);
  }

  /** A comment line (ignored by clients): heartbeats and notices. */
  comment(text: string): void {
    this.write(`: ${text.replaceAll('\n', ' ')}\n\n`);
  }

  /** Ends the response normally (server shutdown). */
  end(): void {
    if (this.closed) return;
    this.stop();
    this.response.end();
  }

  /** Registers what to do when the stream stops, whatever the reason. */
  onClose(listener: () => void): void {
    this.response.once('close', listener);
  }

  private write(chunk: string): void {
    if (this.closed) return;
    if (this.response.writableLength + chunk.length > this.options.maxBufferedBytes) {
      this.stop();
      this.options.onSlowClient();
      this.response.destroy();
      return;
    }
    this.response.write(chunk);
  }

  private stop(): void {
    this.closed = true;
    clearInterval(this.heartbeat);
  }
}
