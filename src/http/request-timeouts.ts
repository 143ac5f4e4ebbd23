import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Requests whose body is timed on idleness rather than on its total time (the preview proxy's uploads). */
const onIdleness = new WeakSet<IncomingMessage>();
/** How often, in parts of the time-out, a body's arrival is looked at: one timed on idleness is cut at most a tenth late. */
const IDLE_CHECKS = 10;

/** The error Node gives a request that did not arrive in time: the server's `clientError` answers it with a 408. */
function timeoutError(): Error {
  return Object.assign(new Error('the request did not arrive in time'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
}

/**
 * Times the arrival of request bodies on `server`, whose own `requestTimeout` is off (Node still
 * times the headers, with `headersTimeout`). A body that has not all arrived within `ms` of its
 * headers is cut: a 408 when nothing was answered yet (the server's `clientError`, as Node
 * does), else the connection is closed. A body marked with `timeBodyOnIdleness` may take as long
 * as it keeps coming: it is cut after `ms` without a byte from the client.
 */
export function timeRequestBodies(server: Server, ms: number): void {
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    if (request.complete) return;
    const socket = request.socket;
    const started = Date.now();
    const step = Math.ceil(ms / IDLE_CHECKS);
    let bytes = socket.bytesRead;
    let quietSince = started;
    const cut = () => {
      if (response.headersSent || !server.emit('clientError', timeoutError(), socket)) socket.destroy();
    };
    const check = () => {
      if (request.complete || socket.destroyed) return;
      const now = Date.now();
      if (socket.bytesRead !== bytes) [bytes, quietSince] = [socket.bytesRead, now];
      const since = onIdleness.has(request) ? quietSince : started;
      if (now - since >= ms) return cut();
      timer = setTimeout(check, Math.min(ms - (now - since), step)).unref();
    };
    let timer = setTimeout(check, step).unref();
    // Every request ends: its body read by a route, or dropped by Node once it is answered.
    request.once('end', () => clearTimeout(timer));
  });
}

/** Times the body of `request` on idleness instead of its total time (see timeRequestBodies). */
export function timeBodyOnIdleness(request: IncomingMessage): void {
  onIdleness.add(request);
}

/**
 * A stop of `server` that is graceful for `graceMs`: then every connection still open (requests
 * under way, upgraded ones such as WebSockets) is destroyed, so that `close` always ends.
 * `stopping` is called when the stop begins.
 */
export function closeWithin(server: Server, graceMs: number): { stopping: () => void } {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return {
    stopping: () => {
      const timer = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, graceMs).unref();
      server.once('close', () => clearTimeout(timer));
    },
  };
}
