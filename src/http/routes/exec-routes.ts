import { envelope } from '../../schemas/common.js';
import { execBody, execResult } from '../../schemas/exec-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { clientGone, errors, ok, type App, type RouteContext } from '../route-types.js';

/** Command execution in persistent sandboxes. */
export async function execRoutes(app: App, { services }: RouteContext): Promise<void> {
  app.post(
    '/sandboxes/:name/exec',
    {
      schema: {
        tags: ['exec'],
        summary: 'Run a command and wait for it; a non-zero exit is still a success (see exit_code)',
        params: sandboxNameParams,
        body: execBody,
        response: { 200: envelope(execResult), ...errors(400, 403, 404, 409) },
      },
    },
    async (request, reply) => ok(await services.exec.exec(request.params.name, request.body, { signal: clientGone(reply) })),
  );
}
