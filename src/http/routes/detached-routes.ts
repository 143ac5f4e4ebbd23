import { StringDecoder } from 'node:string_decoder';
import { isServiceError } from '../../errors.js';
import { envelope } from '../../schemas/common.js';
import { detachedCommand, detachedLogs, detachedLogsQuery, detachedParams } from '../../schemas/detached-schemas.js';
import { execBody } from '../../schemas/exec-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { httpMessage } from '../errors.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { SseStream } from '../sse-stream.js';
import { execContext, onSandbox, type RouteAction } from '../route-actions.js';

/** Output a following client may leave unread before it is cut off (it may reconnect with an offset). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
const HEARTBEAT_MS = 15_000;

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
    // The policy hook gated the request (registerPolicy).
    async (request) => ok(await services.detached.start(request.params.name, request.body, { gated: true })),
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
        summary: 'One output stream of a detached command from a byte offset (the last 4 MiB are kept), or followed',
        description:
          'Kept on the host once the command ends, so it outlives a stop of the sandbox. With `follow=true` the answer is ' +
          'Server-Sent Events: `output` {data, stream, offset} as the command prints, then `done` {status, exit_code, ' +
          'finished_at, next_offset} when it ends; a `: heartbeat` comment every 15 s.',
        params: detachedParams,
        querystring: detachedLogsQuery,
        // With follow=true the reply is hijacked: the event stream bypasses this JSON schema.
        response: { 200: envelope(detachedLogs), ...errors(400, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const { name, id } = request.params;
      const { stream, offset, follow } = request.query;
      if (!follow) return ok(await services.detached.logs(name, id, stream, offset));
      // Unknown sandbox or command: an HTTP error, before the stream opens.
      await services.detached.get(name, id);
      reply.hijack();
      const sse = new SseStream(reply.raw, { heartbeatMs: HEARTBEAT_MS, maxBufferedBytes: MAX_BUFFERED_BYTES, onSlowClient: () => undefined });
      const gone = new AbortController();
      sse.onClose(() => gone.abort());
      let seq = 0;
      const send = (event: string, data: object) => sse.send(++seq, event, JSON.stringify(data));
      const decoder = new StringDecoder('utf8');
      try {
        for await (const event of services.detached.follow(name, id, stream, offset, gone.signal)) {
          if (event.type === 'output') {
            const data = decoder.write(event.data);
            if (data) send('output', { data, stream, offset: event.offset });
          } else {
            const rest = decoder.end();
            if (rest) send('output', { data: rest, stream, offset: event.next_offset - Buffer.byteLength(rest) });
            const { status, exit_code, finished_at } = event.command;
            send('done', { status, exit_code, finished_at, next_offset: event.next_offset });
          }
        }
      } catch (err) {
        if (!isServiceError(err)) request.log.error({ err }, 'followed detached log failed');
        send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error' });
      }
      sse.end();
    },
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

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const detachedRouteActions: Record<string, RouteAction | 'open'> = {
  'POST /sandboxes/:name/exec/detach': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
  'GET /sandboxes/:name/exec/detached': onSandbox('sandbox.get'),
  'GET /sandboxes/:name/exec/detached/:id': onSandbox('sandbox.get'),
  'GET /sandboxes/:name/exec/detached/:id/logs': onSandbox('sandbox.get'),
  'DELETE /sandboxes/:name/exec/detached/:id': onSandbox('sandbox.exec'),
};
