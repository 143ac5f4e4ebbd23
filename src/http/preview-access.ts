import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import type { Principal } from '../domain/principals.js';
import { NAME_PATTERN } from '../schemas/common.js';
import type { GrantCheck, PreviewService } from '../services/preview/index.js';
import { upgradeOf } from './websocket-upgrade.js';

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
interface Grant {
  source: GrantSource;
  exp: string;
  sig: string;
}
const grants = new WeakMap<IncomingMessage, Grant>();

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

/**
 * The values of one cookie of a request, in the order sent: a browser sends several cookies of
 * one name when a page of another host of the same site set one for the whole domain.
 */
export function cookiesOf(request: IncomingMessage, name: string): string[] {
  const values: string[] = [];
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) values.push(pair.slice(at + 1).trim());
  }
  return values;
}

/** Methods a navigation from another origin may use with the cookie: they change nothing, by HTTP's rules. */
const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** Whether an `Origin` header names the host and port the request was sent to (any scheme: a proxy may end TLS in front). */
function isOwnOrigin(origin: string, host: string | undefined): boolean {
  try {
    const from = new URL(origin);
    if (!host || (from.protocol !== 'http:' && from.protocol !== 'https:')) return false;
    // Compared as URLs: case and the scheme's default port are normalized alike.
    return from.host === new URL(`${from.protocol}//${host}`).host;
  } catch {
    // `null` (an opaque origin: a sandboxed page) or no URL at all.
    return false;
  }
}

/**
 * Why a request let in by the grant cookie did not come from the preview's own pages, or
 * undefined when it did. A WebSocket upgrade must carry an `Origin` naming the preview's host
 * (browsers always send it). Another request is refused when the browser says it came from
 * another origin: `Sec-Fetch-Site` other than `same-origin` or `none` (a user's own navigation),
 * else an `Origin` not the preview's; a GET or HEAD navigation (a link, a typed address, a
 * frame) is let through from anywhere, as a SameSite=Lax cookie is. A request with neither
 * header is no browser's cross-origin request and passes.
 */
export function foreignOrigin(request: FastifyRequest): string | undefined {
  const header = (name: string) => [request.headers[name] ?? []].flat()[0];
  const origin = header('origin');
  const host = request.headers.host;
  if (upgradeOf(request)) {
    if (origin === undefined) return 'a WebSocket without an Origin header';
    return isOwnOrigin(origin, host) ? undefined : `a WebSocket opened by ${origin}`;
  }
  if (SAFE_METHODS.has(request.method) && header('sec-fetch-mode') === 'navigate') return undefined;
  const site = header('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? undefined : `a ${site} request${origin ? ` from ${origin}` : ''}`;
  if (origin !== undefined && !isOwnOrigin(origin, host)) return `a request from ${origin}`;
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
    const presented: Grant[] = [];
    if (typeof query.exp === 'string' && typeof query.sig === 'string') presented.push({ source: 'query', exp: query.exp, sig: query.sig });
    else {
      for (const value of cookiesOf(request.raw, PREVIEW_COOKIE)) {
        const [exp, sig] = value.split('.');
        if (exp && sig) presented.push({ source: 'cookie', exp, sig });
      }
    }
    if (presented.length === 0) return undefined;
    // Of several cookies, the one this preview's grant left counts (another host of the site may have set one for the domain).
    let check: GrantCheck = 'invalid';
    let grant = presented[0] as Grant;
    for (const one of presented) {
      const result = await preview.checkGrant(name, port, one.exp, one.sig);
      if (result === 'valid' || check === 'invalid') [check, grant] = [result, one];
      if (result === 'valid') break;
    }
    if (check === 'invalid') throw new ServiceError('UNAUTHORIZED', 'invalid preview URL signature: mint a new preview URL, or send the API key');
    if (check === 'expired') throw new ServiceError('FORBIDDEN', `the preview URL expired at ${new Date(Number(grant.exp) * 1000).toISOString()}: mint a new one`);
    const foreign = grant.source === 'cookie' ? foreignOrigin(request) : undefined;
    if (foreign) {
      throw new ServiceError('FORBIDDEN', `the preview cookie is taken only from the preview's own pages, and this is ${foreign}: send the API key or the signed URL`);
    }
    grants.set(request.raw, grant);
    return PREVIEW_PRINCIPAL;
  };
}

/** The signed grant a request was let in by, if any. */
export const grantOf = (request: FastifyRequest) => grants.get(request.raw);
