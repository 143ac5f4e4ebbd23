import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ANONYMOUS } from '../domain/principals.js';
import { isServiceError, ServiceError } from '../errors.js';
import type { PreviewService, PreviewTarget } from '../services/preview/index.js';
import { cookiesOf, grantOf, PREVIEW_COOKIE, PREVIEW_PRINCIPAL } from './preview-access.js';
import { timeBodyOnIdleness } from './request-timeouts.js';
import type { Upgrade } from './websocket-upgrade.js';

/** Methods whose requests carry no body: sent again when a kept-alive connection turns out closed. */
const BODILESS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection and are never passed on. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/**
 * What the path form adds to every answer: the page runs in an opaque origin, so that a page
 * served from a sandbox cannot read the API origin's storage (the dashboard keeps its key in
 * sessionStorage) nor call the API with its cookies. The host form has an origin of its own.
 */
const PATH_FORM_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';

/** How long a client's connection may keep sending a body the sandbox's server answered without reading, before it is closed. */
const LINGER_MS = 5_000;

/** How one request is forwarded: where to, the path and query to ask for, and which form it came by. */
export interface Forwarding {
  target: PreviewTarget;
  /** The path and query at the sandbox's port (`/app.js?v=1`). */
  path: string;
  /** The path form's prefix (`/sandboxes/box/ports/8000`); none for the host form. */
  prefix?: string;
}

/** The path and query past the first `segments` segments of a URL: `/a/b/c?q` past 2 is `/c?q`. */
export function pathPast(url: string, segments: number): string {
  const match = new RegExp(`^(?:/[^/?]*){${segments}}`).exec(url);
  const rest = url.slice(match?.[0].length ?? 0);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/** The query without the grant's `exp` and `sig` (the sandbox's server never sees them). */
function withoutGrant(path: string): string {
  const at = path.indexOf('?');
  if (at < 0) return path;
  const query = new URLSearchParams(path.slice(at + 1));
  query.delete('exp');
  query.delete('sig');
  const rest = query.toString();
  return rest ? `${path.slice(0, at)}?${rest}` : path.slice(0, at);
}

/** Headers without the hop-by-hop ones and those the Connection header names. */
function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((token) => token.trim().toLowerCase());
  const kept: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.includes(name) && !named.includes(name)) kept[name] = value;
  }
  return kept;
}

/**
 * The request's headers as the sandbox's server gets them: end-to-end only, without the API
 * key that let the request in (a key that is not ours, such as the app's own Authorization, is
 * kept) and without the grant cookie, with X-Forwarded-For, -Host, -Proto (and -Prefix for the
 * path form). The Host stays the client's.
 */
function upstreamHeaders(request: FastifyRequest, forwarding: Forwarding): OutgoingHttpHeaders {
  const headers = endToEnd(request.headers);
  const principal = request.principal;
  if (principal !== PREVIEW_PRINCIPAL && principal?.name !== ANONYMOUS) {
    if (headers.authorization) delete headers.authorization;
    else delete headers['x-api-key'];
  }
  if (cookiesOf(request.raw, PREVIEW_COOKIE).length > 0) {
    const rest = String(headers.cookie)
      .split(';')
      .filter((pair) => pair.split('=')[0]?.trim() !== PREVIEW_COOKIE)
      .join(';')
      .trim();
    if (rest) headers.cookie = rest;
    else delete headers.cookie;
  }
  const forwardedFor = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = forwardedFor ? `${String(forwardedFor)}, ${request.ip}` : request.ip;
  headers['x-forwarded-host'] = request.headers.host ?? '';
  headers['x-forwarded-proto'] = request.protocol;
  if (forwarding.prefix) headers['x-forwarded-prefix'] = forwarding.prefix;
  return headers;
}

/** The Set-Cookie that keeps a grant shown in the URL, for the page's own requests; none otherwise. */
function grantCookie(request: FastifyRequest, forwarding: Forwarding): string | undefined {
  const grant = grantOf(request);
  if (grant?.source !== 'query') return undefined;
  const maxAge = Math.max(0, Number(grant.exp) - Math.floor(Date.now() / 1000));
  const path = forwarding.prefix ? `${forwarding.prefix}/` : '/';
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return `${PREVIEW_COOKIE}=${grant.exp}.${grant.sig}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`;
}

/** The path the sandbox's server is asked for: the grant's query parameters taken out. */
const upstreamPath = (request: FastifyRequest, forwarding: Forwarding) => (grantOf(request)?.source === 'query' ? withoutGrant(forwarding.path) : forwarding.path);

/** A failure to reach the port, as the client sees it: service errors as they are, anything else a 502 naming the port. */
function gatewayError(err: unknown, port: number): Error {
  if (isServiceError(err)) return err;
  const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  return new ServiceError('BAD_GATEWAY', `the server on port ${port} in the sandbox closed the connection without answering (${code})`);
}

/**
 * Ends the client's connection after an answer given before its request's body was all sent:
 * the rest is read and dropped, for LINGER_MS at most, so that the client reads the answer
 * rather than a reset, and the connection is closed at the client's end or after it.
 */
function closeAfterAnswer(request: FastifyRequest): void {
  const socket = request.raw.socket;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(timer));
  request.raw.resume();
  socket.end();
}

/**
 * Forwards one HTTP request to the target's port on a kept-alive connection and streams the
 * answer back: the request body as it arrives, the response as the server sends it. Until the
 * server answers, a failure is thrown (the error envelope: 502 when nothing listens); after
 * that the reply is the server's own. The client's connection is held by the preview service
 * until the exchange is over (closed with the sandbox, and at shutdown); an answer that ends
 * before the request's body has all arrived ends the exchange and its connections. The body
 * is timed on idleness, not on its total time.
 */
export async function forwardHttp(request: FastifyRequest, reply: FastifyReply, forwarding: Forwarding, preview: PreviewService): Promise<void> {
  const { target } = forwarding;
  timeBodyOnIdleness(request.raw);
  const release = preview.hold(target, request.raw.socket);
  const options = { agent: target.connections, method: request.method, path: upstreamPath(request, forwarding), headers: upstreamHeaders(request, forwarding) };
  let outgoing = httpRequest(options);
  // A client that leaves, before the answer or during it, ends the request to the sandbox.
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) outgoing.destroy();
  });
  // The answer (the server's or an error) is sent. A body not all passed on leaves the request to
  // the sandbox unfinished: that connection is closed, and so is the client's when its body is
  // not all read (the rest is not wanted).
  reply.raw.once('finish', () => {
    const read = request.raw.readableEnded;
    if (!read || !outgoing.writableFinished) {
      request.raw.unpipe(outgoing);
      outgoing.destroy();
    }
    if (read) release();
    else closeAfterAnswer(request);
  });
  const send = (again = false) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      outgoing.once('response', resolve);
      outgoing.once('error', reject);
      if (again) outgoing.end();
      else request.raw.pipe(outgoing);
    });
  let response: IncomingMessage;
  try {
    response = await send();
  } catch (err) {
    // A kept-alive connection the server closed meanwhile: a request without a body is sent once more.
    const stale = outgoing.reusedSocket && ['ECONNRESET', 'EPIPE'].includes((err as NodeJS.ErrnoException).code ?? '');
    if (!stale || !BODILESS.has(request.method)) throw gatewayError(err, target.port);
    outgoing = httpRequest(options);
    response = await send(true).catch((again: unknown) => Promise.reject(gatewayError(again, target.port)));
  }
  reply.hijack();
  const headers = endToEnd(response.headers);
  const cookie = grantCookie(request, forwarding);
  if (cookie) headers['set-cookie'] = [...(response.headers['set-cookie'] ?? []), cookie];
  if (forwarding.prefix) headers['content-security-policy'] = PATH_FORM_CSP;
  reply.raw.writeHead(response.statusCode ?? 502, response.statusMessage, headers);
  response.pipe(reply.raw);
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) response.destroy();
  });
  // An answer cut short (the server died, the sandbox went away) cuts the client's connection:
  // the client must not wait for the rest, nor take what came for all of it.
  response.once('close', () => {
    if (!response.complete) reply.raw.destroy();
  });
}

/**
 * Forwards a WebSocket (or any) upgrade on a connection of its own: the upgrade request goes to
 * the port, and once the server switches protocols its 101 goes back and the bytes are relayed
 * both ways until either side closes. A server that answers without switching is answered
 * through the reply like any request.
 */
export async function forwardUpgrade(request: FastifyRequest, reply: FastifyReply, forwarding: Forwarding, preview: PreviewService, upgrade: Upgrade): Promise<void> {
  const { target } = forwarding;
  const connection = await preview.connect(target);
  const headers = { ...upstreamHeaders(request, forwarding), connection: 'Upgrade', upgrade: String(request.headers.upgrade ?? '') };
  const outgoing = httpRequest({ createConnection: () => connection as never, method: request.method, path: upstreamPath(request, forwarding), headers });
  const answer = await new Promise<{ response: IncomingMessage; socket?: Duplex; head?: Buffer }>((resolve, reject) => {
    outgoing.once('upgrade', (response, socket: Duplex, head: Buffer) => resolve({ response, socket, head }));
    outgoing.once('response', (response) => resolve({ response }));
    outgoing.once('error', (err) => reject(gatewayError(err, target.port)));
    outgoing.end();
  });
  reply.hijack();
  const client = upgrade.socket;
  const { response } = answer;
  const lines = [`HTTP/1.1 ${response.statusCode} ${response.statusMessage}`];
  const cookie = grantCookie(request, forwarding);
  if (!answer.socket) {
    // Not switched: the server's answer, its body delimited by the end of the connection.
    const { 'content-length': _length, ...kept } = endToEnd(response.headers);
    for (const [name, value] of Object.entries(kept)) for (const one of [value ?? []].flat()) lines.push(`${name}: ${String(one)}`);
    client.write(`${lines.join('\r\n')}\r\nConnection: close\r\n\r\n`);
    response.pipe(client);
    return;
  }
  for (let i = 0; i < response.rawHeaders.length; i += 2) lines.push(`${response.rawHeaders[i]}: ${response.rawHeaders[i + 1]}`);
  if (cookie) lines.push(`Set-Cookie: ${cookie}`);
  const server = answer.socket;
  client.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (answer.head?.length) client.write(answer.head);
  if (upgrade.head.length) server.write(upgrade.head);
  const close = () => {
    client.destroy();
    server.destroy();
  };
  server.on('error', close).on('close', close);
  client.on('error', close).on('close', close);
  server.pipe(client);
  client.pipe(server);
}
