import { connect, type Socket } from 'node:net';

/** An upload under way on a connection of its own. */
export interface Upload {
  socket: Socket;
  /** All the client got back, once its connection closed. */
  closed: Promise<string>;
  /** What the client got back once an answer's head has come. */
  answered: Promise<string>;
  /** Stops sending (the connection stays open). */
  stop(): void;
}

/**
 * A POST of `total` bytes to `path` at the server `base` (`http://127.0.0.1:18888`) with
 * `headers`, on a raw connection: the body goes `chunk` bytes every `everyMs`, or as fast as the
 * connection takes it when 0, until it is all sent, stopped, or the connection is closed.
 */
export function upload(base: string, path: string, headers: Record<string, string>, total: number, chunk: number, everyMs = 0): Upload {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  let received = '';
  let stopped = false;
  let answer: (text: string) => void = () => undefined;
  const answered = new Promise<string>((resolve) => (answer = resolve));
  socket.on('data', (data: Buffer) => {
    received += data.toString('latin1');
    if (received.includes('\r\n\r\n')) answer(received);
  });
  // The server may close while the client still sends: the close is what the tests wait for.
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  let sent = 0;
  const more = () => {
    while (!stopped && socket.writable && sent < total) {
      const part = Buffer.alloc(Math.min(chunk, total - sent), 120);
      sent += part.length;
      const flushed = socket.write(part);
      if (everyMs) return void setTimeout(more, everyMs);
      if (!flushed) return void socket.once('drain', more);
    }
  };
  socket.once('connect', () => {
    const lines = Object.entries({ host: `${hostname}:${port}`, 'content-length': String(total), ...headers }).map(([name, value]) => `${name}: ${value}`);
    socket.write(`POST ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
    more();
  });
  return { socket, closed, answered, stop: () => (stopped = true) };
}
