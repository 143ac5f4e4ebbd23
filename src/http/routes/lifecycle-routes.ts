import { envelope } from '../../schemas/common.js';
import { extendBody, extendResult, gcResult, reconcileBody, reconcileResult, resizeBody } from '../../schemas/lifecycle-schemas.js';
import { sandboxDetail, sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { onSandbox, type RouteAction } from '../route-actions.js';

// Bodies that may be left out are nullish: Fastify hands a missing body to the validator as null.
const tags = ['lifecycle'];

/** Recover, resize, extend, gc and policy reconciliation. */
export async function lifecycleRoutes(app: App, { services }: RouteContext): Promise<void> {
  const lifecycle = services.lifecycle;

  app.post(
    '/sandboxes/:name/recover',
    {
      schema: {
        tags,
        summary: 'Clear the archive metadata of an archived sandbox (status stopped); start brings it back with its files',
        params: sandboxNameParams,
        response: { 200: envelope(sandboxDetail), ...errors(404, 409) },
      },
    },
    async (request) => ok(await lifecycle.recover(request.params.name)),
  );

  app.post(
    '/sandboxes/:name/resize',
    {
      schema: {
        tags,
        summary: 'Change vcpus and/or memory_mb: in place while running, kept for the next start otherwise',
        params: sandboxNameParams,
        body: resizeBody,
        response: { 200: envelope(sandboxDetail), ...errors(400, 404, 409, 422) },
      },
    },
    async (request) => ok(await lifecycle.resize(request.params.name, request.body)),
  );

  app.post(
    '/sandboxes/:name/extend',
    {
      schema: {
        tags,
        summary: 'Extend the time to live: expires_at = max(expires_at, now) + by (default 1h); a sandbox without an expiry keeps none (set one with PATCH ttl)',
        params: sandboxNameParams,
        body: extendBody.nullish(),
        response: { 200: envelope(extendResult), ...errors(400, 404) },
      },
    },
    async (request) => ok(await lifecycle.extend(request.params.name, request.body?.by)),
  );

  app.post(
    '/gc',
    { schema: { tags, summary: 'Remove the sandboxes whose expires_at has passed', response: { 200: envelope(gcResult), ...errors() } } },
    async () => ok(await lifecycle.gc()),
  );

  app.post(
    '/lifecycle/reconcile',
    {
      schema: {
        tags,
        summary: 'Apply lifecycle policies (stop, archive, delete); dry_run only previews',
        body: reconcileBody.nullish(),
        response: { 200: envelope(reconcileResult), ...errors(400) },
      },
    },
    async (request) => ok(await lifecycle.reconcile(request.body?.dry_run ?? false)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const lifecycleRouteActions: Record<string, RouteAction | 'open'> = {
  'POST /sandboxes/:name/recover': onSandbox('sandbox.recover'),
  'POST /sandboxes/:name/resize': onSandbox('sandbox.resize'),
  'POST /sandboxes/:name/extend': onSandbox('sandbox.extend'),
  'POST /gc': { action: 'admin.gc', resource: () => 'service:gc' },
  'POST /lifecycle/reconcile': { action: 'admin.reconcile', resource: () => 'service:reconcile' },
};
