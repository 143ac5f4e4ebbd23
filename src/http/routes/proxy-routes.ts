import { envelope, message } from '../../schemas/common.js';
import { createProxyHookBody, proxyHook, proxyHookParams, proxyHookQuery, proxyLogEntry, proxyLogQuery } from '../../schemas/proxy-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

const tags = ['proxy'];

/**
 * Hooks of the egress proxy and its recent decisions. The proxy itself is served on the proxy
 * port (absolute-form requests and CONNECT from sandboxes), not here.
 */
export async function proxyRoutes(app: App, { services }: RouteContext): Promise<void> {
  const { hooks, proxyLog } = services.egress;

  app.get(
    '/proxy/hooks',
    { schema: { tags, summary: 'List the proxy hooks, in the order on_request hooks run (creation order)', response: { 200: envelope(proxyHook.array()) } } },
    async () => ok(await hooks.list()),
  );

  app.post(
    '/proxy/hooks',
    {
      schema: {
        tags,
        summary: 'Add a proxy hook, applied at once to every sandbox (persisted)',
        description:
          'on_request hooks run in creation order before a request is forwarded: block denies; webhook is POSTed the request ' +
          '({timestamp, sandbox, sandbox_uuid, method, url, host, port, path, headers} with Authorization and cookies redacted) and ' +
          'answers {action: allow|deny, reason?} within timeout_ms, else its fail (open: allow, closed: deny) applies; audit publishes ' +
          'proxy.audited. on_response hooks are told after the request (status, bytes_in, bytes_out, latency_ms, decision), never ' +
          'delaying it. CONNECT tunnels show only host and port (method CONNECT, url https://host:port, path "").',
        body: createProxyHookBody,
        response: { 201: envelope(proxyHook), ...errors(400, 409) },
      },
    },
    async (request, reply) => reply.code(201).send(ok(await hooks.create(request.body))),
  );

  app.delete(
    '/proxy/hooks/:name',
    { schema: { tags, summary: 'Delete a proxy hook', params: proxyHookParams, response: { 200: message, ...errors(400, 404) } } },
    async (request) => ok(await hooks.remove(request.params.name)),
  );

  app.delete(
    '/proxy/hooks',
    { schema: { tags, summary: 'Delete a proxy hook named by ?name=', querystring: proxyHookQuery, response: { 200: message, ...errors(400, 404) } } },
    async (request) => ok(await hooks.remove(request.query.name)),
  );

  app.get(
    '/proxy/log',
    {
      schema: {
        tags,
        summary: "The egress proxy's recent decisions, newest first (the newest 10,000 are kept in the state store, across restarts); admin keys, others where a policy rule or grant allows proxy.log",
        querystring: proxyLogQuery,
        response: { 200: envelope(proxyLogEntry.array()), ...errors(400, 403) },
      },
    },
    async (request) => ok(await proxyLog.recent(request.query.limit, request.query.sandbox)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const proxyRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /proxy/hooks': { action: 'proxy.hooks.list', resource: all('proxy-hook') },
  'POST /proxy/hooks': { action: 'proxy.hooks.create', resource: (i) => `proxy-hook:${text(i.body?.name) ?? ''}` },
  'DELETE /proxy/hooks/:name': { action: 'proxy.hooks.delete', resource: named('proxy-hook', 'name') },
  'DELETE /proxy/hooks': { action: 'proxy.hooks.delete', resource: (i) => `proxy-hook:${text(i.query?.name) ?? ''}` },
  'GET /proxy/log': { action: 'proxy.log', resource: (i) => `sandbox:${text(i.query?.sandbox) ?? '*'}` },
};
