import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import type { Principal } from '../domain/principals.js';
import { NAME_PATTERN } from '../schemas/common.js';
import type { PreviewService } from '../services/preview/index.js';

/** The cookie a signed preview URL leaves behind, so that the page's own requests carry the grant. */
export const PREVIEW_COOKIE = 'sandboxd_preview';
/** Who a request with a valid signed grant acts as (policy rules may name it). */
export const PREVIEW_PRINCIPAL: Principal = { name: 'preview-url', admin: false, labels: {} };

/** The methods a preview forwards (HEAD by GET's route entry in the policy table); the sandbox's server answers each. */
export const PREVIEW_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Route templates of the path form. */
export const PATH_FORM_ROUTES = ['/sandboxes/:name/ports/:port', '/sandboxes/:name/ports/:port/*'] as const;
/** Internal route template the host form is routed to (rewriteUrl); never reachable by its path. */
export const HOST_FORM_ROUTE = '/_preview/:port/:name/*';
const HOST_FORM_PREFIX = '/_preview/';
/** Where a request for the internal prefix that did not come by a preview host goes: no route, a 404. */
const NO_ROUTE = '/_preview';

const PREVIEW_ROUTES = new Set<string>([...PATH_FORM_ROUTES, HOST_FORM_ROUTE]);

/** How a request's signed grant came: in the URL's query (a first visit) or in the cookie. */
export type GrantSource = 'query' | 'cookie';
const grants = new WeakMap<IncomingMessage, { source: GrantSource; exp: string; sig: string }>();

/**
 * Fastify's `rewriteUrl`: a request whose Host is `<port>-<name>.<preview domain>` goes to the
 * host form's internal route, whatever its path (`/sandboxes` there is the sandbox's, not the
 * API's); the internal prefix reached by any other host is a 404.
 */
export function previewRewrite(preview: PreviewService): (request: IncomingMessage) => string {
  return (request) => {
    const url = request.url ?? '/';
    const target = preview.hostTarget(request.headers.host);
    if (target && NAME_PATTERN.test(target.name) && url.startsWith('/')) return `${HOST_FORM_PREFIX}${target.port}/${target.name}${url}`;
    return url.startsWith(HOST_FORM_PREFIX) ? NO_ROUTE : url;
  };
}

/** Whether a request is a preview request (either form). */
export const isPreviewRoute = (request: FastifyRequest): boolean => PREVIEW_ROUTES.has(request.routeOptions.url ?? '');

/** The value of one cookie of a request. */
export function cookieOf(request: IncomingMessage, name: string): string | undefined {
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The auth hook's way in without a key: a preview request that carries a signed grant (`exp` and
 * `sig` in its query, else the cookie a first visit left) acts as PREVIEW_PRINCIPAL. A grant that
 * is not this server's for this sandbox and port is a 401, an expired one a 403; a request with
 * none is left to the key check (undefined).
 */
export function previewGrant(preview: PreviewService): (request: FastifyRequest) => Promise<Principal | undefined> {
  return async (request) => {
    if (!isPreviewRoute(request)) return undefined;
    const query = (request.query ?? {}) as Record<string, unknown>;
    const { name = '', port = '' } = request.params as Record<string, string>;
    let presented: { source: GrantSource; exp: string; sig: string } | undefined;
    if (typeof query.exp === 'string' && typeof query.sig === 'string') presented = { source: 'query', exp: query.exp, sig: query.sig };
    else {
      const [exp, sig] = (cookieOf(request.raw, PREVIEW_COOKIE) ?? '').split('.');
      if (exp && sig) presented = { source: 'cookie', exp, sig };
    }
    if (!presented) return undefined;
    const check = await preview.checkGrant(name, port, presented.exp, presented.sig);
    if (check === 'invalid') throw new ServiceError('UNAUTHORIZED', 'invalid preview URL signature: mint a new preview URL, or send the API key');
    if (check === 'expired') throw new ServiceError('FORBIDDEN', `the preview URL expired at ${new Date(Number(presented.exp) * 1000).toISOString()}: mint a new one`);
    grants.set(request.raw, presented);
    return PREVIEW_PRINCIPAL;
  };
}

/** The signed grant a request was let in by, if any. */
export const grantOf = (request: FastifyRequest) => grants.get(request.raw);
