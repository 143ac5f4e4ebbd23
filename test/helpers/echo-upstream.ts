import { createServer as createHttpServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { generate } from 'selfsigned';

/** One request as the echo upstream received it. */
export interface Echoed {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A local upstream (HTTP, or HTTPS with a certificate of its own) that echoes what it gets:
 * the request's Authorization and X-Api-Key come back as response headers, and the body is
 * `{method, url, headers, body}` as JSON, written a few bytes at a time (so that a value is
 * split across chunks) or, for `?gzip`, gzip-compressed. It records every request.
 */
export class EchoUpstream {
  readonly received: Echoed[] = [];
  private server: Server | undefined;
  port = 0;
  /** The HTTPS upstream's certificate (PEM), its own trust anchor; undefined over HTTP. */
  cert: string | undefined;

  constructor(private readonly options: { tls?: { names: string[]; ips: string[] } } = {}) {}

  async start(host = '127.0.0.1'): Promise<number> {
    const handler = (req: IncomingMessage, res: ServerResponse) => this.answer(req, res);
    if (this.options.tls) {
      const { names, ips } = this.options.tls;
      const pems = await generate([{ name: 'commonName', value: 'echo upstream test CA' }], {
        keyType: 'ec',
        algorithm: 'sha256',
        extensions: [
          { name: 'basicConstraints', cA: true, critical: true },
          { name: 'keyUsage', digitalSignature: true, keyCertSign: true, critical: true },
          { name: 'extKeyUsage', serverAuth: true },
          { name: 'subjectAltName', altNames: [...names.map((value) => ({ type: 2 as const, value })), ...ips.map((ip) => ({ type: 7 as const, ip }))] },
        ],
      });
      this.cert = pems.cert;
      this.server = createHttpsServer({ cert: pems.cert, key: pems.private }, handler);
    } else {
      this.server = createHttpServer(handler);
    }
    const server = this.server;
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    this.port = (server.address() as AddressInfo).port;
    return this.port;
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const echoed = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() };
      this.received.push(echoed);
      const body = Buffer.from(JSON.stringify(echoed));
      const headers = { 'content-type': 'application/json', 'x-echo-authorization': String(req.headers.authorization ?? ''), 'x-echo-key': String(req.headers['x-api-key'] ?? '') };
      if (req.url?.includes('gzip')) {
        const zipped = gzipSync(body);
        res.writeHead(200, { ...headers, 'content-encoding': 'gzip', 'content-length': zipped.length });
        res.end(zipped);
        return;
      }
      res.writeHead(200, { ...headers, 'content-length': body.length });
      // A few bytes per write, each flushed on its own: a value never comes in one chunk.
      let at = 0;
      const next = () => {
        if (at >= body.length) return void res.end();
        res.write(body.subarray(at, at + 7));
        at += 7;
        setImmediate(next);
      };
      next();
    });
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
