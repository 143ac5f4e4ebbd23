import { envelope } from '../../schemas/common.js';
import { execBody, execResult } from '../../schemas/exec-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { streamCommand } from '../command-stream.js';
import { execContext, onSandbox, type RouteAction } from '../route-actions.js';

export interface ExecRouteOptions extends RouteContext {
  /** How often /exec/stream sends a heartbeat comment. */
  heartbeatMs: number;
}


/** Command execution in persistent sandboxes: waited for, or streamed as it prints. */
export async function execRoutes(app: App, { services, heartbeatMs }: ExecRouteOptions): Promise<void> {
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
    // The policy hook gated the request (registerPolicy).
    async (request, reply) => ok(await services.exec.exec(request.params.name, request.body, { signal: clientGone(reply), gated: true })),
  );

  app.post(
    '/sandboxes/:name/exec/stream',
    {
      schema: {
        tags: ['exec'],
        summary: 'Run a command and stream its output as it prints (Server-Sent Events)',
        description:
          'Events: `started` {sandbox}, `output` {content, stream: stdout|stderr} as the command prints, then ' +
          '`done` {exit_code, timed_out, truncated, duration_ms, oom_killed when true} or `error` {message}; a `: heartbeat` ' +
          'comment every 15 s. A client that disconnects has the command killed (its whole process tree).',
        params: sandboxNameParams,
        body: execBody,
        response: { 200: textReply('text/event-stream', 'The command as Server-Sent Events'), ...errors(400, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      // A request the sandbox would refuse (missing, stopped) is an HTTP error, before the stream opens;
      // the schema and the policy hook's gate refused the others.
      await services.sandboxes.requireRunning(name);
      await streamCommand(reply, request.log, { heartbeatMs, what: 'exec' }, async ({ signal, send, onOutput }) => {
        send('started', { sandbox: name });
        return services.exec.exec(name, request.body, { signal, onOutput, gated: true });
      });
    },
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const execRouteActions: Record<string, RouteAction | 'open'> = {
  'POST /sandboxes/:name/exec': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
  'POST /sandboxes/:name/exec/stream': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
};
