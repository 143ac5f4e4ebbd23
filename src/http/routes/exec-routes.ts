import { StringDecoder } from 'node:string_decoder';
import { isServiceError } from '../../errors.js';
import { envelope } from '../../schemas/common.js';
import { execBody, execResult } from '../../schemas/exec-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { httpMessage } from '../errors.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { SseStream } from '../sse-stream.js';

export interface ExecRouteOptions extends RouteContext {
  /** How often /exec/stream sends a heartbeat comment. */
  heartbeatMs: number;
}

/** Output an /exec/stream client may leave unread before it is cut off (and its command killed). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

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
    async (request, reply) => ok(await services.exec.exec(request.params.name, request.body, { signal: clientGone(reply) })),
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
      // A request the sandbox would refuse (missing, stopped, sudo off) is an HTTP error, before the stream opens.
      services.exec.check(request.body);
      await services.sandboxes.requireRunning(name);
      reply.hijack();
      const stream = new SseStream(reply.raw, { heartbeatMs, maxBufferedBytes: MAX_BUFFERED_BYTES, onSlowClient: () => undefined });
      const gone = new AbortController();
      stream.onClose(() => gone.abort());
      let id = 0;
      const send = (event: string, data: object) => stream.send(++id, event, JSON.stringify(data));
      // A chunk may end inside a multi-byte character: each stream keeps its own decoder.
      const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
      send('started', { sandbox: name });
      try {
        const result = await services.exec.exec(name, request.body, {
          signal: gone.signal,
          onOutput: ({ stream: which, data }) => {
            const content = decoders[which].write(data);
            if (content) send('output', { content, stream: which });
          },
        });
        const { exit_code, duration_ms, timed_out, truncated, oom_killed } = result;
        send('done', { exit_code, duration_ms, timed_out, truncated, ...(oom_killed ? { oom_killed } : {}) });
      } catch (err) {
        if (!isServiceError(err)) request.log.error({ err }, 'streamed exec failed');
        send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error' });
      }
      stream.end();
    },
  );
}
