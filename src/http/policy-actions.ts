import { domainRouteActions } from '../services/domains.js';
import type { RouteAction } from './route-actions.js';

export type { RouteAction, RouteInput, RouteLookups } from './route-actions.js';

/** Routes of the server itself, not of a domain: health, status, the dashboard's files, metrics. */
const CORE_ROUTE_ACTIONS: Record<string, RouteAction | 'open'> = {
  'GET /health': 'open',
  'GET /status': 'open',
  // The dashboard's static files and the API reference page (its calls are API routes, decided).
  'GET /': 'open',
  'GET /ui': 'open',
  'GET /ui/*': 'open',
  'GET /docs': 'open',
  'GET /stats': { action: 'service.stats', resource: () => 'service:stats' },
  'GET /metrics': { action: 'service.metrics', resource: () => 'service:metrics' },
  'GET /openapi.json': { action: 'service.openapi', resource: () => 'service:openapi' },
};

/**
 * Every route of the HTTP API (method and template, as Fastify registers it) and what the
 * policy sees of it: the core routes' and every domain's own (DomainModule.routeActions); `open` routes (health and status, answered without a key) are not decided.
 * A route missing here is refused at start-up (see registerPolicy), and a unit test lists
 * every registered route against this table, so no new route slips past the policy.
 */
export const ROUTE_ACTIONS: Record<string, RouteAction | 'open'> = { ...CORE_ROUTE_ACTIONS, ...domainRouteActions() };
