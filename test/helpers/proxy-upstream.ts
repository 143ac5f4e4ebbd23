import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as a local upstream received it. */
export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
}

/**
 * A local HTTP upstream on 127.0.0.1 that records what it receives and answers
 * `hello from upstream` (or `handler`'s answer); `/hang` never answers.
 */
export class ProxyUpstream {
  readonly received: Received[] = [];
  private server: Server | undefined;
  port = 0;

  async start(host = '127.0.0.1'): Promise<number> {
    this.server = createServer((req, res) => {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => (bytes += chunk.length));
      req.on('end', () => {
        this.received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes });
        if (req.url === '/hang') return;
        res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': 'yes', connection: 'keep-alive, x-hop', 'x-hop': 'dropped' });
        res.end(`hello from upstream ${bytes}`);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** `Proxy-Authorization` for a sandbox token. */
export const proxyAuth = (token: string) => `Basic ${Buffer.from(`sbx:${token}`).toString('base64')}`;

/** An absolute-form request through the proxy at `proxy` (`http://host:port`). */
export function viaProxy(
  proxy: string,
  url: string,
  options: { token?: string; method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  const { hostname, port } = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        method: options.method ?? 'GET',
        path: url,
        headers: { ...(options.token ? { 'proxy-authorization': proxyAuth(options.token) } : {}), ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * A CONNECT through the proxy; when it opens, `GET /tunnelled` is sent through the tunnel and
 * the raw answer read. `status` is the proxy's answer to CONNECT.
 */
export function connectVia(proxy: string, authority: string, token?: string): Promise<{ status: number; text: string; tunnelled?: string }> {
  const { hostname, port } = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method: 'CONNECT', path: authority, headers: token ? { 'proxy-authorization': proxyAuth(token) } : {} });
    req.on('connect', (res, socket, head: Buffer) => {
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [head];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        return;
      }
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        if (Buffer.concat(chunks).toString().includes('hello from upstream')) {
          socket.destroy();
          resolve({ status: 200, text: '', tunnelled: Buffer.concat(chunks).toString() });
        }
      });
      socket.write(`GET /tunnelled HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A name resolver for the egress proxy that maps test names to local addresses (no DNS); others are ENOTFOUND. */
export function resolverOf(names: Record<string, string>): (host: string) => Promise<{ address: string; family: number }[]> {
  return async (host) => {
    const address = names[host];
    if (!address) throw Object.assign(new Error(`no such test name: ${host}`), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
}
