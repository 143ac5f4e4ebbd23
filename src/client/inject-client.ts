import type { FastifyInstance } from 'fastify';
import { unwrap, urlOf, type ApiClient, type ApiRequest } from './api-client.js';
import { SseReader } from './sse-reader.js';

/** Links an injected request to its caller's AbortSignal. Only inject requests reach the app, so no one else can send it. */
const CALL_HEADER = 'x-sandboxd-mcp-call';

/**
 * The in-process client: requests go through the Fastify app with `inject()`, without a
 * socket, so the tools meet exactly the routes, validation and auth that HTTP clients meet.
 *
 * A cancelled call must behave like an HTTP client that hangs up (its command is killed), but
 * `inject()` has no connection to drop. So each request carries an id, and when its caller
 * aborts, a hook emits 'close' on the unfinished reply, which is how Node tells a route that
 * its client went away. The route then ends its work (a run removes its sandbox) and replies,
 * so the call settles only when that work is done. The hook is added here: make the client
 * before the app's first request.
 */
export function injectClient(app: Pick<FastifyInstance, 'inject' | 'addHook'>, target: string, apiKey?: string): ApiClient {
  const signals = new Map<string, AbortSignal>();
  let lastId = 0;
  app.addHook('onRequest', async (request, reply) => {
    const id = request.headers[CALL_HEADER];
    const signal = typeof id === 'string' ? signals.get(id) : undefined;
    if (!signal) return;
    const hangUp = () => reply.raw.emit('close');
    if (signal.aborted) hangUp();
    else signal.addEventListener('abort', hangUp, { once: true });
  });

  /**
   * One injected request, linked to its caller's signal. `asStream`: the reply is handed over
   * once its head is written, its body a stream read as the route writes it.
   */
  const send = async (request: ApiRequest, signal: AbortSignal | undefined, { headers = {}, asStream = false }: { headers?: Record<string, string>; asStream?: boolean } = {}) => {
    const id = String(++lastId);
    if (signal) signals.set(id, signal);
    try {
      return await app.inject({
        method: request.method,
        url: urlOf(request),
        headers: { ...request.headers, ...headers, [CALL_HEADER]: id, ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        ...(request.body !== undefined ? { payload: request.body as object } : {}),
        payloadAsStream: asStream,
      });
    } finally {
      signals.delete(id);
    }
  };

  return {
    target,
    async request(request, signal) {
      const response = await send(request, signal);
      return unwrap(response.statusCode, response.body);
    },
    // The body is read as the route writes it, so each event is handed on as the command prints.
    async stream(request, onEvent, signal) {
      const response = await send(request, signal, { headers: { accept: 'text/event-stream' }, asStream: true });
      const body = response.stream().setEncoding('utf8') as AsyncIterable<string>;
      if (response.statusCode !== 200) {
        let text = '';
        for await (const chunk of body) text += chunk;
        unwrap(response.statusCode, text);
        return;
      }
      const reader = new SseReader(onEvent);
      for await (const chunk of body) reader.push(chunk);
    },
  };
}
