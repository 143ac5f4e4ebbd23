import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../telemetry/logger.js';

/** Serves the requests of one path prefix of the proxy port (origin-form requests, `GET /llm/...`). */
export type PrefixHandler = (request: IncomingMessage, response: ServerResponse, path: string) => Promise<void>;

/**
 * What a forward proxy adds to the port: absolute-form requests (`GET http://host/...`) and
 * `CONNECT host:port` tunnels. Without one, the port answers them 405.
 */
export interface ForwardProxy {
  request(request: IncomingMessage, response: ServerResponse): Promise<void>;
  connect(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void>;
}

/**
 * The proxy port: one node:http listener on the address sandboxes reach the host at (Docker's
 * bridge gateway), serving what sandboxes use of the server: path prefixes mounted by services
 * (the LLM gateway at `/llm/`) and, once mounted, a forward proxy. It is separate from the API
 * port on purpose: sandboxes never reach the API, and nothing here takes an API key (each
 * handler checks the sandbox token it needs).
 */
export class ProxyServer {
  private readonly prefixes: [string, PrefixHandler][] = [];
  private forward: ForwardProxy | undefined;
  private servers: Server[] = [];
  private bound: { host: string; port: number }[] = [];

  constructor(private readonly logger: Logger) {}

  /** Serves the paths that begin with `prefix` (say `/llm/`) with `handler`. */
  mount(prefix: string, handler: PrefixHandler): void {
    this.prefixes.push([prefix, handler]);
  }

  /** Serves absolute-form requests and CONNECT tunnels with `proxy`. */
  mountForward(proxy: ForwardProxy): void {
    this.forward = proxy;
  }

  /** Where it listens (the first address); undefined before `listen` and after `close`. */
  get address(): { host: string; port: number } | undefined {
    return this.bound[0];
  }

  /** Every address it listens on (one per network its sandboxes are on). */
  get addresses(): readonly { host: string; port: number }[] {
    return this.bound;
  }

  /**
   * Listens on `host:port`, and on the same port of each further host (port 0: any free port,
   * the same on every host); all or none.
   */
  async listen(host: string | readonly string[], port: number): Promise<void> {
    const [first = '', ...others] = typeof host === 'string' ? [host] : host;
    try {
      const bound = await this.listenOne(first, port);
      for (const other of others) await this.listenOne(other, bound);
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  private async listenOne(host: string, port: number): Promise<number> {
    const server = createServer((request, response) => void this.dispatch(request, response));
    server.on('connect', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      if (this.forward) {
        void this.forward.connect(request, socket, head).catch((err: Error) => {
          this.logger.error({ err }, 'proxy CONNECT failed');
          socket.destroy();
        });
      } else {
        socket.end('HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nthis port serves the LLM gateway (/llm/<provider>/...), not CONNECT\n');
      }
    });
    // Answers may stream for minutes (model output): no request timeout, idle sockets still closed.
    server.requestTimeout = 0;
    server.keepAliveTimeout = 65_000;
    server.on('clientError', (_err, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.servers.push(server);
    const bound = (server.address() as AddressInfo).port;
    this.bound.push({ host, port: bound });
    return bound;
  }

  /** Stops listening and ends the connections it holds. */
  async close(): Promise<void> {
    const servers = this.servers;
    this.servers = [];
    this.bound = [];
    await Promise.all(
      servers.map((server) => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        return closed;
      }),
    );
  }

  /** The path of an absolute URL that names this port's own address, else undefined. */
  private ownPath(target: string): string | undefined {
    try {
      const url = new URL(target);
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      const port = Number(url.port || 80);
      return url.protocol === 'http:' && this.bound.some((bound) => bound.host === host && bound.port === port) ? `${url.pathname}${url.search}` : undefined;
    } catch {
      return undefined;
    }
  }

  private async dispatch(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const target = request.url ?? '/';
      // An absolute URL naming this port itself (a client that sends even the gateway through
      // the proxy) is served here like its origin-form path.
      const own = target.startsWith('/') ? target : this.ownPath(target);
      if (own === undefined) {
        if (this.forward) return await this.forward.request(request, response);
        return plain(response, 405, 'this port serves the LLM gateway (/llm/<provider>/...), not proxy requests');
      }
      const path = own.replace(/\?.*$/s, '');
      const mounted = this.prefixes.find(([prefix]) => path.startsWith(prefix));
      if (!mounted) return plain(response, 404, `nothing is served at ${path} on this port: the LLM gateway is at /llm/<provider>/...`);
      await mounted[1](request, response, path);
    } catch (err) {
      this.logger.error({ err }, 'proxy port request failed');
      if (!response.headersSent) plain(response, 500, 'internal error of the proxy port (see the server log)');
      else response.destroy();
    }
  }
}

/** A plain-text answer, for requests that reached no handler. */
function plain(response: ServerResponse, status: number, message: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(message) + 1 });
  response.end(`${message}\n`);
}
