import type { FastifyInstance } from 'fastify';
import { isServiceError } from '../errors.js';
import type { RequestContext } from '../services/governance/index.js';
import type { ServiceApi } from '../services/context.js';
import { ROUTE_ACTIONS, type RouteInput } from './policy-actions.js';

/** The table key of a request or route: HEAD is answered by its GET route. */
const routeKey = (method: string, url: string | undefined) => `${method === 'HEAD' ? 'GET' : method} ${url}`;

/**
 * Policy on every request: a `preHandler` (after auth and validation, so the body is typed)
 * looks the route up in ROUTE_ACTIONS and asks the policy service to decide. Registering a
 * route the table does not know fails at start-up, so a new route cannot slip past the policy.
 * The service's gate of a command request (sudo while `[api].allow_sudo_exec` is off) answers
 * before the policy, so that rules only narrow it; it runs here once per command the request
 * carries (the routes then tell the service `gated`).
 */
export function registerPolicy(app: FastifyInstance, services: Pick<ServiceApi, 'policy' | 'exec' | 'sandboxes'>): void {
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (!(routeKey(method, route.url) in ROUTE_ACTIONS)) {
        throw new Error(`route ${method} ${route.url} has no entry in ROUTE_ACTIONS (src/http/policy-actions.ts): give it an action`);
      }
    }
  });

  /** The labels, image and profile of an existing sandbox, for rules that test them; none for a missing one (the route answers 404). */
  const sandboxFacts = async (name: string): Promise<RequestContext> => {
    try {
      const record = await services.sandboxes.require(name);
      return { labels: record.labels, image: record.image, profile: record.profile };
    } catch (err) {
      if (isServiceError(err) && err.code === 'NOT_FOUND') return {};
      throw err;
    }
  };

  const lookups = { sandboxName: (uuid: string) => services.sandboxes.nameOf(uuid) };

  app.addHook('preHandler', async (request) => {
    const entry = ROUTE_ACTIONS[routeKey(request.method, request.routeOptions.url)];
    if (entry === undefined || entry === 'open') return;
    const input: RouteInput = {
      params: (request.params ?? {}) as Record<string, string>,
      body: typeof request.body === 'object' && request.body !== null && !Buffer.isBuffer(request.body) ? (request.body as Record<string, unknown>) : undefined,
      query: (request.query ?? {}) as Record<string, unknown>,
    };
    const given = entry.context?.(input) ?? {};
    const contexts = Array.isArray(given) ? (given.length ? given : [{}]) : [given];
    for (const context of contexts) if (context.sudo !== undefined) services.exec.gate(context);
    const facts = entry.sandbox && services.policy.needsResourceFacts ? await sandboxFacts(await entry.sandbox(input, lookups)) : {};
    const resource = await entry.resource(input, lookups);
    for (const context of contexts) services.policy.authorize(request.principal, entry.action, resource, { ...facts, ...context });
  });
}
