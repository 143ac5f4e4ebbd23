import { envelope } from '../../schemas/common.js';
import { buildImageBody, imageBuildView, imageBuilt, imageDeleted, imageNameParams, imageView } from '../../schemas/image-schemas.js';
import { MAX_CONTEXT_BYTES } from '../../services/images/index.js';
import { isServiceError } from '../../errors.js';
import { httpMessage } from '../errors.js';
import { openEventStream } from '../command-stream.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

export interface ImageRouteOptions extends RouteContext {
  /** How often a streamed build sends a heartbeat comment. */
  heartbeatMs: number;
}

const tags = ['images'];
/** A body carries the context in base64 (4/3 of its bytes) and some JSON around it. */
const BODY_LIMIT_BYTES = Math.ceil((MAX_CONTEXT_BYTES * 4) / 3) + 1024 * 1024;

const wantsStream = (accept: string | undefined) => /\btext\/event-stream\b/.test(accept ?? '');

/** Images: the catalog and images built from a Dockerfile (built, listed, deleted). */
export async function imageRoutes(app: App, { services, heartbeatMs }: ImageRouteOptions): Promise<void> {
  const images = services.images;

  app.get(
    '/images',
    { schema: { tags, summary: 'List the catalog images (present or not) and the images built from a Dockerfile', response: { 200: envelope(imageView.array()), ...errors() } } },
    async () => ok(await images.list()),
  );

  app.get(
    '/images/builds',
    {
      schema: {
        tags,
        summary: 'List the recorded image builds, newest first (the last 200 finished and every running one)',
        response: { 200: envelope(imageBuildView.array()), ...errors() },
      },
    },
    async () => ok(await images.builds()),
  );

  app.post(
    '/images',
    {
      bodyLimit: BODY_LIMIT_BYTES,
      schema: {
        tags,
        summary: 'Build an image from a Dockerfile, offline, as sandboxd-user/<deployment id>/<name>:latest',
        description:
          'Every image the Dockerfile reads (FROM, --from) is an earlier stage or present on the engine, and what would fetch (ADD of a URL...) is a 400 naming the line: nothing is pulled; build steps have no network. The context (files, or a ' +
          'base64 tar) is at most 64 MiB (413). Without `Accept: text/event-stream` the answer waits: 201 {name, tag, id, size_bytes}, ' +
          'or 400 with the build log in `details.log` (also for a build past its bounds: processes, disk per step and per build, which the log\'s last line names); ' +
          '429 when --build-concurrency builds are running. With it, Server-Sent Events: `log` {content} as the engine reports, then ' +
          '`done` {name, tag, id, size_bytes} or `error` {message, log}. A failed build leaves no image or container behind.',
        body: buildImageBody,
        response: { 200: textReply('text/event-stream', 'The build as Server-Sent Events'), 201: envelope(imageBuilt), ...errors(400, 413, 422, 429) },
      },
    },
    async (request, reply) => {
      const prepared = await images.prepare(request.body);
      if (!wantsStream(request.headers.accept)) return reply.status(201).send(ok(await images.build(prepared, undefined, clientGone(reply))));
      const { stream, gone, send } = openEventStream(reply, heartbeatMs);
      try {
        send('done', await images.build(prepared, (content) => send('log', { content }), gone.signal));
      } catch (err) {
        if (!isServiceError(err)) request.log.error({ err }, 'streamed image build failed');
        const log = isServiceError(err) && typeof err.details?.log === 'string' ? err.details.log : '';
        send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error', log });
      }
      stream.end();
    },
  );

  app.delete(
    '/images/:name',
    {
      schema: {
        tags,
        summary: 'Delete an image built from a Dockerfile (409 while a sandbox uses it; the warm pools let go of it)',
        params: imageNameParams,
        response: { 200: envelope(imageDeleted), ...errors(400, 404, 409, 422) },
      },
    },
    async (request) => ok(await images.remove(request.params.name)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const imageRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /images': { action: 'image.list', resource: all('image') },
  'GET /images/builds': { action: 'image.list', resource: all('image') },
  'POST /images': { action: 'image.build', resource: (i) => `image:${text(i.body?.name) ?? ''}` },
  'DELETE /images/:name': { action: 'image.delete', resource: named('image', 'name') },
};
