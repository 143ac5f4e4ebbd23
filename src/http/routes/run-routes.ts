import { StringDecoder } from 'node:string_decoder';
import { isServiceError } from '../../errors.js';
import { envelope } from '../../schemas/common.js';
import { execResult } from '../../schemas/exec-schemas.js';
import { batchBody, batchResult, runBody } from '../../schemas/run-schemas.js';
import { httpMessage } from '../errors.js';
import { clientGone, errors, ok, textReply, type App, type RouteContext } from '../route-types.js';
import { SseStream } from '../sse-stream.js';

export interface RunRouteOptions extends RouteContext {
  /** How often /run/stream sends a heartbeat comment. */
  heartbeatMs: number;
}

/** Output a /run/stream client may leave unread before it is cut off (and its run killed). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

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
    async (request, reply) => ok(await services.runs.run(request.body, { signal: clientGone(reply) })),
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
      // A request no sandbox would accept is an HTTP error, before the stream opens.
      services.runs.check(request.body);
      reply.hijack();
      const stream = new SseStream(reply.raw, { heartbeatMs, maxBufferedBytes: MAX_BUFFERED_BYTES, onSlowClient: () => undefined });
      const gone = new AbortController();
      stream.onClose(() => gone.abort());
      let id = 0;
      const send = (event: string, data: object) => stream.send(++id, event, JSON.stringify(data));
      // A chunk may end inside a multi-byte character: each stream keeps its own decoder.
      const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
      try {
        const result = await services.runs.run(request.body, {
          signal: gone.signal,
          onStarted: (sandbox) => send('started', { sandbox }),
          onStage: (stage) => send('progress', { stage }),
          onOutput: ({ stream: name, data }) => {
            const content = decoders[name].write(data);
            // `data` repeats `content` for clients that read that name (the agentkernel SDKs).
            if (content) send('output', { content, stream: name, data: content });
          },
        });
        const { exit_code, duration_ms, timed_out, truncated, oom_killed } = result;
        send('done', { exit_code, duration_ms, timed_out, truncated, ...(oom_killed ? { oom_killed } : {}) });
      } catch (err) {
        if (!isServiceError(err)) request.log.error({ err }, 'streamed run failed');
        send('error', { message: isServiceError(err) ? httpMessage(err) : 'internal error' });
      }
      stream.end();
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
    async (request, reply) => ok({ results: await services.runs.batch(request.body.commands, clientGone(reply)) }),
  );
}
