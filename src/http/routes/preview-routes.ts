import type { FastifyReply, FastifyRequest } from 'fastify';
import { previewHostParams, previewParams, previewPathParams, previewQuery, previewUrl, previewUrlBody } from '../../schemas/preview-schemas.js';
import type { PreviewService } from '../../services/preview/index.js';
import { HOST_FORM_ROUTE, PATH_FORM_ROUTES, PREVIEW_METHODS } from '../preview-access.js';
import { forwardHttp, forwardUpgrade, pathPast, type Forwarding } from '../preview-proxy.js';
import { envelope } from '../../schemas/common.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { upgradeOf } from '../websocket-upgrade.js';
import { onSandbox, previewEntries, type RouteAction } from '../route-actions.js';

const tags = ['preview'];
/** Segments of the path form's prefix: /sandboxes/{name}/ports/{port}. */
const PATH_FORM_SEGMENTS = 4;
/** Segments the host form's internal route puts before the sandbox's own path: /_preview/{port}/{name}. */
const HOST_FORM_SEGMENTS = 3;

const proxyResponses = { ...errors(400, 401, 403, 404, 409, 422, 502), 200: { description: "The sandbox server's own answer, any status" } };

/**
 * Preview URLs: the path form `/sandboxes/{name}/ports/{port}/...` and the host form
 * `<port>-<name>.<preview domain>` (routed here by rewriteUrl, preview-access.ts) forward HTTP
 * and WebSocket traffic to a port inside the sandbox; `POST .../url` mints a signed URL.
 * Bodies are not parsed: they stream to the sandbox's server as they arrive.
 */
export async function previewRoutes(app: App, { services }: RouteContext): Promise<void> {
  const preview = services.preview;
  // A stop does not wait for previews: their connections (uploads under way, WebSockets) are closed first.
  app.addHook('preClose', async () => preview.close());

  app.post(
    '/sandboxes/:name/ports/:port/url',
    {
      schema: {
        tags,
        summary: 'Mint a signed preview URL that works without the API key until it expires',
        params: previewParams,
        body: previewUrlBody,
        response: { 200: envelope(previewUrl), ...errors(400, 404) },
      },
    },
    async (request) => {
      const host = request.headers.host ?? request.hostname;
      return ok(await preview.mint(request.params.name, request.params.port, request.body?.expires_in ?? '1h', { protocol: request.protocol, host }));
    },
  );
  await app.register(proxyRoutes, { preview });
}

/** The forwarding routes, in a context of their own whose bodies are left unread (they stream to the sandbox). */
async function proxyRoutes(app: App, { preview }: { preview: PreviewService }): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  // One route per method, so that each has an operation of its own in the OpenAPI document.
  for (const [url, method] of PATH_FORM_ROUTES.flatMap((url) => PREVIEW_METHODS.map((method) => [url, method] as const))) {
    app.route({
      method,
      url,
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Forward a request (HTTP or WebSocket) to a port inside the sandbox',
        params: url.endsWith('*') ? previewPathParams : previewParams,
        querystring: previewQuery,
        response: proxyResponses,
      },
      handler: (request, reply) => {
        const { name, port } = request.params as { name: string; port: string };
        const prefix = request.url.replace(/\?.*$/s, '').split('/').slice(0, PATH_FORM_SEGMENTS + 1).join('/');
        return forward(preview, request, reply, name, port, { path: pathPast(request.url, PATH_FORM_SEGMENTS), prefix });
      },
    });
  }

  app.route({
    method: [...PREVIEW_METHODS],
    url: HOST_FORM_ROUTE,
    exposeHeadRoute: false,
    schema: { hide: true, params: previewHostParams, querystring: previewQuery },
    handler: (request, reply) => {
      const { name, port } = request.params as { name: string; port: string };
      return forward(preview, request, reply, name, port, { path: pathPast(request.url, HOST_FORM_SEGMENTS) });
    },
  });
}

/** Resolves the target (400, 404, 409, 422 before anything is sent) and forwards the request or its upgrade. */
async function forward(preview: PreviewService, request: FastifyRequest, reply: FastifyReply, name: string, port: string, where: Omit<Forwarding, 'target'>): Promise<void> {
  const forwarding = { ...where, target: await preview.target(name, port) };
  const upgrade = upgradeOf(request);
  if (upgrade) await forwardUpgrade(request, reply, forwarding, preview, upgrade);
  else await forwardHttp(request, reply, forwarding, preview);
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const previewRouteActions: Record<string, RouteAction | 'open'> = {
  // Preview URLs: every method of both forms (the host form's internal route included) and minting.
  ...previewEntries(),
  'POST /sandboxes/:name/ports/:port/url': onSandbox('sandbox.preview'),
};
