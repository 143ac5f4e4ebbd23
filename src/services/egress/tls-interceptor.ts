import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { Logger } from '../../telemetry/logger.js';
import type { EgressCa } from './egress-ca.js';

/** Serves one request read inside an intercepted tunnel. */
export type InnerHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/** What became of an intercepted tunnel: 200 and the bytes each way, or the failure before it opened. */
export interface TunnelOutcome {
  status: number;
  bytes_in: number;
  bytes_out: number;
  failed?: boolean;
}

/**
 * TLS interception of one CONNECT: the tunnel is answered 200, TLS is terminated with a leaf
 * certificate of the egress CA for the CONNECT's host (HTTP/1.1 by ALPN), and each HTTP request
 * read inside goes to `handle`, which forwards it over a new, verified TLS connection. The
 * requests are parsed by a node:http server that never listens: tunnels are handed to it.
 */
export class TlsInterceptor {
  private readonly server: Server;
  private readonly handlers = new WeakMap<object, InnerHandler>();
  private readonly open = new Set<TLSSocket>();

  constructor(private readonly input: { ca: EgressCa; idleMs: number; logger: Logger }) {
    this.server = createServer((request, response) => {
      const handle = this.handlers.get(request.socket);
      if (!handle) return void response.destroy();
      handle(request, response).catch((err: unknown) => {
        this.input.logger.error({ err }, 'intercepted request failed');
        if (!response.headersSent) {
          response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
          response.end('internal error of the egress proxy (see the server log)\n');
        } else response.destroy();
      });
    });
    // As the proxy port: answers may stream for minutes; idle tunnels are closed below.
    this.server.requestTimeout = 0;
    this.server.keepAliveTimeout = 65_000;
    this.server.on('clientError', (_err, socket: Duplex) => socket.destroy());
  }

  /** Intercepts the tunnel to `host` (a name, or a bracketed IPv6 address) until either side ends it. */
  async intercept(socket: Duplex, head: Buffer, host: string, handle: InnerHandler): Promise<TunnelOutcome> {
    let context;
    try {
      context = await this.input.ca.contextFor(host.replace(/^\[(.*)\]$/, '$1'));
    } catch (err) {
      this.input.logger.error({ err, host }, 'no certificate for an intercepted host');
      const body = 'the egress proxy could not make a certificate for this host (see the server log)\n';
      socket.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      return { status: 502, bytes_in: 0, bytes_out: 0, failed: true };
    }
    const raw = socket as Partial<Socket>;
    const readBefore = raw.bytesRead ?? 0;
    const writtenBefore = raw.bytesWritten ?? 0;
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) socket.unshift(head);
    const tls = new TLSSocket(socket as Socket, { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] });
    this.open.add(tls);
    this.handlers.set(tls, handle);
    tls.setTimeout(this.input.idleMs, () => tls.destroy());
    return new Promise((resolve) => {
      tls.on('error', () => tls.destroy());
      tls.once('close', () => {
        this.open.delete(tls);
        socket.destroy();
        resolve({ status: 200, bytes_in: (raw.bytesWritten ?? 0) - writtenBefore, bytes_out: (raw.bytesRead ?? 0) - readBefore });
      });
      this.server.emit('connection', tls);
    });
  }

  /** Ends every intercepted tunnel. */
  close(): void {
    for (const tls of this.open) tls.destroy();
    this.open.clear();
  }
}
