import WebSocket from 'ws';
import { ServiceError } from '../errors.js';
import { unwrap } from './api-client.js';

/**
 * Opens a WebSocket to the server with the API key in the Authorization header (and the local
 * server's CA for https); a refused upgrade is thrown as the server's ServiceError (its message
 * and next step), an unreachable server as BACKEND_UNAVAILABLE.
 */
export function openWebSocket(
  base: string,
  path: string,
  { apiKey, ca, keyAdvice }: { apiKey: string | undefined; ca: string[] | undefined; keyAdvice: string },
): Promise<WebSocket> {
  const url = base.replace(/^http/, 'ws') + path;
  const ws = new WebSocket(url, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {}, ...(ca ? { ca } : {}) });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => {
        try {
          unwrap(response.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
          reject(new ServiceError('INTERNAL', `unexpected reply to a WebSocket upgrade (HTTP ${response.statusCode})`));
        } catch (err) {
          const unauthorized = err instanceof ServiceError && err.code === 'UNAUTHORIZED';
          reject(unauthorized ? new ServiceError('UNAUTHORIZED', `${err.message}: ${keyAdvice}`) : (err as Error));
        }
      });
    });
    ws.once('error', (err) => reject(new ServiceError('BACKEND_UNAVAILABLE', `cannot reach the sandboxd server at ${base} (${err.message}): check that \`sandboxd serve\` is running there`)));
  });
}
