import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';

/** The socket and first bytes of an upgrade request, kept on the raw request. */
const UPGRADE = Symbol('sandboxd.upgrade');

type UpgradeRequest = IncomingMessage & { [UPGRADE]?: { socket: Duplex; head: Buffer } };

/**
 * WebSocket routes are ordinary Fastify routes: every HTTP upgrade request goes through
 * Fastify's router with a response bound to its socket, so authentication, validation, policy
 * and the error envelope apply to it as to any request, and a refusal (401, 404, 409...) is an
 * HTTP answer before any upgrade. A route that accepts the upgrade calls `acceptWebSocket`;
 * a route that answers instead has the connection closed after its answer.
 */
export function registerWebSocketUpgrades(app: FastifyInstance): WebSocketServer {
  const sockets = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  app.server.on('upgrade', (request: UpgradeRequest, socket: Duplex, head: Buffer) => {
    request[UPGRADE] = { socket, head };
    const response = new ServerResponse(request);
    response.assignSocket(socket as never);
    response.once('finish', () => socket.end());
    socket.on('error', () => socket.destroy());
    app.routing(request, response);
  });
  app.addHook('onClose', async () => {
    for (const client of sockets.clients) client.terminate();
    sockets.close();
  });
  app.decorate('webSockets', sockets);
  return sockets;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Accepts the WebSocket upgrades of routes (websocket-upgrade.ts). */
    webSockets: WebSocketServer;
  }
}

/** Whether the request asks for a WebSocket (an upgrade to `websocket`, through the server's upgrade event). */
export function isUpgrade(request: FastifyRequest): boolean {
  return (request.raw as UpgradeRequest)[UPGRADE] !== undefined && request.headers.upgrade?.toLowerCase() === 'websocket';
}

/**
 * Completes the WebSocket handshake of an upgrade request; Fastify no longer answers it. It
 * rejects when the handshake is not a valid WebSocket one (ws then answers 400 itself).
 */
export function acceptWebSocket(app: FastifyInstance, request: FastifyRequest, reply: { hijack(): void }): Promise<WebSocket> {
  const upgrade = (request.raw as UpgradeRequest)[UPGRADE];
  if (!upgrade) return Promise.reject(new Error('not an upgrade request'));
  reply.hijack();
  return new Promise((resolve, reject) => {
    upgrade.socket.once('close', () => reject(new Error('the client closed the connection during the handshake')));
    app.webSockets.handleUpgrade(request.raw, upgrade.socket, upgrade.head, (ws) => resolve(ws));
  });
}
