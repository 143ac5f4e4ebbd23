import { envelope } from '../../schemas/common.js';
import { execResult } from '../../schemas/exec-schemas.js';
import { runBody } from '../../schemas/run-schemas.js';
import { clientGone, errors, ok, type App, type RouteContext } from '../route-types.js';

/** One-shot runs in fresh sandboxes. */
export async function runRoutes(app: App, { services }: RouteContext): Promise<void> {
  app.post(
    '/run',
    {
      schema: {
        tags: ['run'],
        summary: 'Run one command in a fresh sandbox that is removed afterwards; a non-zero exit is still a success',
        body: runBody,
        response: { 200: envelope(execResult), ...errors(400, 403, 422, 429, 503) },
      },
    },
    async (request, reply) => ok(await services.runs.run(request.body, { signal: clientGone(reply) })),
  );
}
