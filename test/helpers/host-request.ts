import { request as httpRequest, type IncomingMessage } from 'node:http';

/** A GET to a server with headers of our choosing, Host included (fetch does not let one set it). */
export function getWithHeaders(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string; headers: IncomingMessage['headers'] }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: response.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}
