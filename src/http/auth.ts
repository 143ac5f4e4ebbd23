import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';

/** Routes open without a key (method + route template): probes, and the dashboard's static files. */
const OPEN_ROUTES = new Set(['GET /health', 'GET /status', 'GET /', 'GET /ui', 'GET /ui/*', 'GET /docs', 'HEAD /ui/*', 'HEAD /docs']);

const digest = (key: string) => createHash('sha256').update(key).digest();

/** The key a request presents: `Authorization: Bearer <key>` or `X-API-Key: <key>`. */
function presentedKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    return match?.[1]?.trim();
  }
  const header = request.headers['x-api-key'];
  return Array.isArray(header) ? header[0] : header;
}

/**
 * Authentication: when at least one key is configured every request but the OPEN_ROUTES
 * must present one of them. Keys are compared as SHA-256 digests in constant
 * time, against every configured key, so timing tells nothing about which came close.
 */
export function registerAuth(app: FastifyInstance, keys: string[]): void {
  if (keys.length === 0) return;
  const digests = keys.map(digest);
  const accepts = (key: string): boolean => {
    const candidate = digest(key);
    let ok = false;
    for (const d of digests) ok = timingSafeEqual(d, candidate) || ok;
    return ok;
  };
  app.addHook('onRequest', async (request) => {
    if (OPEN_ROUTES.has(`${request.method} ${request.routeOptions.url}`)) return;
    const key = presentedKey(request);
    if (!key) throw new ServiceError('UNAUTHORIZED', 'missing API key: send Authorization: Bearer <key>');
    if (!accepts(key)) throw new ServiceError('UNAUTHORIZED', 'invalid API key');
  });
}
