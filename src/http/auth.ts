import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ANONYMOUS, type ApiKey, type Principal } from '../domain/principals.js';
import { ServiceError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request acts for: the principal of the key it presented, else `anonymous`. */
    principal: Principal;
  }
}

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
 * Another way than a key for some routes (method + route template): the principal a token in
 * the request stands for, undefined when the request carries none (then a key is required).
 */
export type TokenAuth = Record<string, (request: FastifyRequest) => Principal | undefined>;

/**
 * Authentication: when at least one key is configured every request but the OPEN_ROUTES
 * must present one of them. Keys are compared as SHA-256 digests in constant
 * time, against every configured key, so timing tells nothing about which came close.
 * A route in `tokens` may present a token of its own instead (a terminal's one-use token).
 * Every request gets its principal: the presented key's (or token's), or `anonymous` (an admin on a server
 * without keys, where everyone may do everything; a non-admin on the open routes of one with keys).
 * A request without a key may still be let in by `grant` (a signed preview URL), which names
 * the principal it acts as, throws when what it was shown is bad, or leaves it to the key.
 */
export function registerAuth(
  app: FastifyInstance,
  keys: readonly ApiKey[],
  tokens: TokenAuth = {},
  grant?: (request: FastifyRequest) => Promise<Principal | undefined>,
): void {
  const open: Principal = { name: ANONYMOUS, admin: keys.length === 0, labels: {} };
  // Null until the onRequest hook below sets it (fastify's overload for a null start value).
  app.decorateRequest('principal', null, []);
  const entries = keys.map((k) => ({ digest: digest(k.key), principal: { name: k.name, admin: k.admin, labels: k.labels } }));
  const principalOf = (key: string): Principal | undefined => {
    const candidate = digest(key);
    let found: Principal | undefined;
    for (const entry of entries) {
      // Every digest is compared, the match or not, so that timing tells nothing.
      if (timingSafeEqual(entry.digest, candidate)) found = entry.principal;
    }
    return found;
  };
  app.addHook('onRequest', async (request) => {
    request.principal = open;
    if (keys.length === 0 || OPEN_ROUTES.has(`${request.method} ${request.routeOptions.url}`)) return;
    const key = presentedKey(request);
    const byToken = key ? undefined : tokens[`${request.method} ${request.routeOptions.url}`]?.(request);
    if (byToken) {
      request.principal = byToken;
      return;
    }
    // A key that is not ours may be the preview's own (an app's Authorization): a grant may still let it in.
    const principal = (key ? principalOf(key) : undefined) ?? (await grant?.(request));
    if (principal) {
      request.principal = principal;
      return;
    }
    if (!key) throw new ServiceError('UNAUTHORIZED', 'missing API key: send Authorization: Bearer <key>');
    throw new ServiceError('UNAUTHORIZED', 'invalid API key');
  });
}
