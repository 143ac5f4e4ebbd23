import { envelope } from '../../schemas/common.js';
import { execResult } from '../../schemas/exec-schemas.js';
import { batchBody, batchResult, runBody } from '../../schemas/run-schemas.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { streamCommand } from '../command-stream.js';
import { all, runContext, type RouteAction } from '../route-actions.js';

export interface RunRouteOptions extends RouteContext {
  /** How often /run/stream sends a heartbeat comment. */
  heartbeatMs: number;
}


/** One-shot runs in fresh sandboxes: plain, streamed, and in batches. */
export async function runRoutes(app: App, { services, heartbeatMs }: RunRouteOptions): Promise<void> {
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
    // The policy hook gated the request (registerPolicy).
    async (request, reply) => ok(await services.runs.run(request.body, { signal: clientGone(reply), gated: true })),
  );

  app.post(
    '/run/stream',
    {
      schema: {
        tags: ['run'],
        summary: 'Run one command in a fresh sandbox and stream its progress and output (Server-Sent Events)',
        description:
          'Events: `started` {sandbox}, `progress` {stage: creating|starting|executing}, `output` {content, stream, data} ' +
          '(data repeats content) as the ' +
          'command prints, then `done` {exit_code, duration_ms, timed_out, truncated, oom_killed when true} or `error` {message}; ' +
          'a `: heartbeat` comment every 15 s. ' +
          'A client that disconnects has its command killed and its sandbox removed.',
        body: runBody,
        response: { 200: textReply('text/event-stream', 'The run as Server-Sent Events'), ...errors(400, 403) },
      },
    },
    async (request, reply) => {
      // The schema and the policy hook's gate refused a request no sandbox would accept, before the stream opens.
      // `data` repeats `content` for clients that read that name (the agentkernel SDKs).
      await streamCommand(reply, request.log, { heartbeatMs, what: 'run', outputExtra: (content) => ({ data: content }) }, ({ signal, send, onOutput }) =>
        services.runs.run(request.body, {
          signal,
          onOutput,
          gated: true,
          onStarted: (sandbox) => send('started', { sandbox }),
          onStage: (stage) => send('progress', { stage }),
        }),
      );
    },
  );

  app.post(
    '/batch/run',
    {
      schema: {
        tags: ['run'],
        summary: 'Run each command in its own fresh sandbox, in parallel (bounded); results in input order',
        body: batchBody,
        response: { 200: envelope(batchResult), ...errors(400) },
      },
    },
    // The policy hook gated each command (registerPolicy).
    async (request, reply) => ok({ results: await services.runs.batch(request.body.commands, clientGone(reply), true) }),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const runRouteActions: Record<string, RouteAction | 'open'> = {
  'POST /run': { action: 'run', resource: all('run'), context: (i) => runContext(i.body) },
  'POST /run/stream': { action: 'run', resource: all('run'), context: (i) => runContext(i.body) },
  'POST /batch/run': {
    action: 'run',
    resource: all('run'),
    context: (i) => (Array.isArray(i.body?.commands) ? (i.body.commands as Record<string, unknown>[]).map(runContext) : []),
  },
};
