import { envelope } from '../../schemas/common.js';
import { detachedCommand, detachedLogs, detachedLogsQuery, detachedParams } from '../../schemas/detached-schemas.js';
import { execBody } from '../../schemas/exec-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';

/** Detached commands: started by one request, watched and killed by later ones. */
export async function detachedRoutes(app: App, { services }: RouteContext): Promise<void> {
  const tags = ['exec'];
  app.post(
    '/sandboxes/:name/exec/detach',
    {
      schema: {
        tags,
        summary: 'Start a command and return at once; it runs on after the request (and a server restart)',
        params: sandboxNameParams,
        body: execBody,
        response: { 200: envelope(detachedCommand), ...errors(400, 403, 404, 409, 422) },
      },
    },
    async (request) => ok(await services.detached.start(request.params.name, request.body)),
  );

  app.get(
    '/sandboxes/:name/exec/detached',
    {
      schema: {
        tags,
        summary: "The sandbox's detached commands, oldest first",
        params: sandboxNameParams,
        response: { 200: envelope(detachedCommand.array()), ...errors(404, 409, 422) },
      },
    },
    async (request) => ok(await services.detached.list(request.params.name)),
  );

  app.get(
    '/sandboxes/:name/exec/detached/:id',
    {
      schema: { tags, summary: 'Status of a detached command', params: detachedParams, response: { 200: envelope(detachedCommand), ...errors(404, 409, 422) } },
    },
    async (request) => ok(await services.detached.get(request.params.name, request.params.id)),
  );

  app.get(
    '/sandboxes/:name/exec/detached/:id/logs',
    {
      schema: {
        tags,
        summary: 'The last 4 MiB of one output stream of a detached command',
        params: detachedParams,
        querystring: detachedLogsQuery,
        response: { 200: envelope(detachedLogs), ...errors(400, 404, 409, 422) },
      },
    },
    async (request) => ok(await services.detached.logs(request.params.name, request.params.id, request.query.stream)),
  );

  app.delete(
    '/sandboxes/:name/exec/detached/:id',
    {
      schema: {
        tags,
        summary: "Kill a detached command's process tree; returns its status after",
        params: detachedParams,
        response: { 200: envelope(detachedCommand), ...errors(404, 409, 422) },
      },
    },
    async (request) => ok(await services.detached.kill(request.params.name, request.params.id)),
  );
}
