import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** The connection of an upgrade request, and what the client sent past its headers. */
export interface Upgrade {
  socket: Duplex;
  head: Buffer;
}

const upgrades = new WeakMap<IncomingMessage, Upgrade>();

/**
 * Upgrade requests (WebSocket) go through Fastify's routing like any request, so that auth,
 * policy, validation and the error envelope apply to them too: the server's `upgrade` event
 * dispatches them with a response bound to their socket. A route that takes upgrades reads the
 * socket with `upgradeOf` and hijacks the reply; for any other route the answer is written to
 * the socket, which is then closed.
 */
export function registerUpgrades(app: FastifyInstance): void {
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrades.set(request, { socket, head });
    socket.on('error', () => socket.destroy());
    const response = new ServerResponse(request);
    response.assignSocket(socket as never);
    response.once('finish', () => socket.end());
    app.routing(request, response);
  });
}

/** The upgrade a request asks for, when it came through the server's `upgrade` event. */
export function upgradeOf(request: FastifyRequest): Upgrade | undefined {
  return upgrades.get(request.raw);
}
