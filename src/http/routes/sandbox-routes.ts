import { z } from 'zod';
import { envelope, message } from '../../schemas/common.js';
import {
  createSandboxBody,
  listSandboxesQuery,
  patchSandboxBody,
  sandboxDetail,
  sandboxNameParams,
  sandboxSummary,
  sandboxUuidParams,
} from '../../schemas/sandbox-schemas.js';
import { auditEntry } from '../../schemas/service-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, labelsOf, onSandbox, text, type RouteAction } from '../route-actions.js';

const tags = ['sandboxes'];

/** Sandbox CRUD, start/stop and the audit log. */
export async function sandboxRoutes(app: App, { services }: RouteContext): Promise<void> {
  const sandboxes = services.sandboxes;

  app.get(
    '/sandboxes',
    {
      schema: {
        tags,
        summary:
          "List sandboxes, optionally by labels (label=key:value, repeatable, ANDed) and status (status=running, repeatable, ORed); the server's own (internal) ones only with internal=true",
        querystring: listSandboxesQuery,
        response: { 200: envelope(z.array(sandboxSummary)), ...errors(400) },
      },
    },
    async (request) => {
      const { label, status, internal } = request.query;
      return ok(await sandboxes.list(label === undefined ? [] : [label].flat(), status === undefined ? [] : [status].flat(), internal));
    },
  );

  app.post(
    '/sandboxes',
    {
      schema: {
        tags,
        summary: 'Create and start a sandbox',
        body: createSandboxBody,
        response: { 201: envelope(sandboxDetail), ...errors(400, 409, 413, 422, 429, 503) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await sandboxes.create(request.body))),
  );

  app.get(
    '/sandboxes/by-uuid/:uuid',
    {
      schema: { tags, summary: 'Get a sandbox by its UUID', params: sandboxUuidParams, response: { 200: envelope(sandboxDetail), ...errors(400, 404) } },
    },
    async (request) => ok(await sandboxes.getByUuid(request.params.uuid)),
  );

  app.get(
    '/sandboxes/:name',
    { schema: { tags, summary: 'Get a sandbox', params: sandboxNameParams, response: { 200: envelope(sandboxDetail), ...errors(400, 404) } } },
    async (request) => ok(await sandboxes.get(request.params.name)),
  );

  app.patch(
    '/sandboxes/:name',
    {
      schema: {
        tags,
        summary: 'Update labels (replaced whole), description, lifecycle (null clears) or expiry (ttl, or expires_at: null); returns the sandbox',
        params: sandboxNameParams,
        body: patchSandboxBody,
        response: { 200: envelope(sandboxDetail), ...errors(400, 404) },
      },
    },
    async (request) => ok(await sandboxes.update(request.params.name, request.body ?? {})),
  );

  app.post(
    '/sandboxes/:name/start',
    { schema: { tags, summary: 'Start a stopped sandbox (idempotent)', params: sandboxNameParams, response: { 200: envelope(sandboxDetail), ...errors(404, 409) } } },
    async (request) => ok(await sandboxes.start(request.params.name)),
  );

  app.post(
    '/sandboxes/:name/stop',
    {
      schema: { tags, summary: 'Stop a sandbox, keeping its files (idempotent)', params: sandboxNameParams, response: { 200: envelope(sandboxDetail), ...errors(404, 409) } },
    },
    async (request) => ok(await sandboxes.stop(request.params.name)),
  );

  app.delete(
    '/sandboxes/:name',
    { schema: { tags, summary: 'Remove a sandbox and everything in it: answers once its record is gone (the name is free at once); the engine removes the container in the background', params: sandboxNameParams, response: { 200: message, ...errors(404) } } },
    async (request) => ok(await sandboxes.remove(request.params.name)),
  );

  app.get(
    '/sandboxes/:name/logs',
    {
      schema: { tags, summary: 'Audit log of a sandbox, oldest first', params: sandboxNameParams, response: { 200: envelope(z.array(auditEntry)), ...errors(404) } },
    },
    async (request) => ok(await services.logs(request.params.name)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const sandboxRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /sandboxes': { action: 'sandbox.list', resource: all('sandbox') },
  'POST /sandboxes': {
    action: 'sandbox.create',
    resource: (i) => `sandbox:${text(i.body?.name) ?? ''}`,
    context: (i) => {
      const image = text(i.body?.image);
      const profile = text(i.body?.profile);
      const labels = labelsOf(i.body?.labels);
      return { ...(image ? { image } : {}), profile: profile ?? 'moderate', ...(labels ? { labels } : {}) };
    },
  },
  // Decided on the sandbox's name, like GET /sandboxes/:name: a rule on sandbox:prod-* covers both.
  'GET /sandboxes/by-uuid/:uuid': {
    action: 'sandbox.get',
    resource: async (i, lookups) => `sandbox:${(await lookups.sandboxName(i.params.uuid ?? '')) ?? i.params.uuid}`,
    sandbox: async (i, lookups) => (await lookups.sandboxName(i.params.uuid ?? '')) ?? '',
  },
  'GET /sandboxes/:name': onSandbox('sandbox.get'),
  'PATCH /sandboxes/:name': onSandbox('sandbox.update'),
  'POST /sandboxes/:name/start': onSandbox('sandbox.start'),
  'POST /sandboxes/:name/stop': onSandbox('sandbox.stop'),
  'DELETE /sandboxes/:name': onSandbox('sandbox.delete'),
  'GET /sandboxes/:name/logs': onSandbox('sandbox.logs'),
};
