import type { z } from 'zod';
import { isServiceError } from '../../errors.js';
import { envelope } from '../../schemas/common.js';
import { fsListing, fsPathQuery, fsStat, fsWatchQuery } from '../../schemas/fs-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { httpMessage } from '../errors.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { SseStream } from '../sse-stream.js';
import { onSandbox, type RouteAction } from '../route-actions.js';

export interface FsRouteOptions extends RouteContext {
  /** How often a watch sends a heartbeat comment. */
  heartbeatMs: number;
}

const tags = ['files'];
/** Events a watching client may leave unread before it is cut off (and its watch ended). */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/** File system views of a running sandbox: listings, stat, and watches as Server-Sent Events. */
export async function fsRoutes(app: App, { services, heartbeatMs }: FsRouteOptions): Promise<void> {
  const views = services.fsViews;

  app.get(
    '/sandboxes/:name/fs',
    { schema: viewSchema('List a directory (name, type, size, mode, mtime), sorted by name, at most 10,000 entries', fsListing) },
    async (request) => ok(await views.list(request.params.name, request.query.path)),
  );

  app.get(
    '/sandboxes/:name/fs/stat',
    { schema: viewSchema('Describe one path (a symbolic link itself, not what it points to)', fsStat) },
    async (request) => ok(await views.stat(request.params.name, request.query.path)),
  );

  app.get(
    '/sandboxes/:name/fs/watch',
    {
      schema: {
        tags,
        summary: 'Watch a path for changes (Server-Sent Events)',
        description:
          'Events: `ready` {path, recursive} once the watch is in place, then `created`, `modified`, `deleted` {path, type: file|dir} ' +
          'as files change (coalesced per path over 50 ms: a write that makes a file is one `created`), `error` {message} when ' +
          'something is not watched (more than 8192 directories, lost events); a `: heartbeat` comment every 15 s. The stream ends ' +
          'when the watched path is deleted; a client that disconnects ends the watch in the sandbox. A missing path is 404 before the stream.',
        params: sandboxNameParams,
        querystring: fsWatchQuery,
        response: { 200: textReply('text/event-stream', 'Changes as Server-Sent Events'), ...errors(400, 403, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const recursive = request.query.recursive !== 'false';
      const signal = clientGone(reply);
      const { path, events } = await views.watch(name, request.query.path, { recursive, signal });
      reply.hijack();
      const stream = new SseStream(reply.raw, { heartbeatMs, maxBufferedBytes: MAX_BUFFERED_BYTES, onSlowClient: () => undefined });
      let id = 0;
      const send = (event: string, data: object) => stream.send(++id, event, JSON.stringify(data));
      send('ready', { path, recursive });
      try {
        for await (const event of events) {
          if (!stream.open) break;
          send(event.event, dataOf(event));
        }
      } catch (err) {
        if (!signal.aborted) {
          if (!isServiceError(err)) request.log.error({ err }, 'watch failed');
          send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error' });
        }
      }
      stream.end();
    },
  );
}

/** The schema of a listing or a stat: the same query and refusals, a different view. */
function viewSchema<T extends z.ZodType>(summary: string, data: T) {
  return { tags, summary, params: sandboxNameParams, querystring: fsPathQuery, response: { 200: envelope(data), ...errors(400, 403, 404, 409, 422) } };
}

/** The data of one watch event: `{message}` for an error, else `{path, type}`. */
function dataOf(event: { event: string; path?: string; type?: string; message?: string }): object {
  return event.event === 'error' ? { message: event.message } : { path: event.path, type: event.type };
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const fsRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /sandboxes/:name/fs': onSandbox('sandbox.files.read'),
  'GET /sandboxes/:name/fs/stat': onSandbox('sandbox.files.read'),
  'GET /sandboxes/:name/fs/watch': onSandbox('sandbox.files.read'),
};
