import type { OpenAPIV3_2 } from '@fastify/swagger';
import { ServiceError } from '../../errors.js';
import { eventsHeaders, eventsQuery, type EventType } from '../../schemas/event-schemas.js';
import { errors, textReply, type App, type RouteContext } from '../route-types.js';
import { SseStream } from '../sse-stream.js';
import { text, type RouteAction } from '../route-actions.js';

export interface EventRouteOptions extends RouteContext {
  /** Heartbeat comment interval of GET /events. */
  heartbeatMs: number;
}

type OpenApiWebhooks = NonNullable<OpenAPIV3_2.Document['webhooks']>;

/** The OpenAPI 3.1 `webhooks` entry: what every --webhook-url receives. */
export const webhookDocument: OpenApiWebhooks = {
  sandboxEvent: {
    post: {
      summary: 'One POST per event to every --webhook-url (the receiver implements this)',
      parameters: [
        { in: 'header', name: 'X-Sandboxd-Event', required: true, schema: { type: 'string' }, description: 'The event type' },
        {
          in: 'header',
          name: 'X-Sandboxd-Delivery',
          required: true,
          schema: { type: 'string', format: 'uuid' },
          description: 'Id of the delivery, the same on its retries',
        },
        {
          in: 'header',
          name: 'X-Sandboxd-Signature',
          required: false,
          schema: { type: 'string' },
          description: 'sha256=<hex HMAC-SHA256 of the raw body, keyed by --webhook-secret>; present when a secret is set',
        },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/SandboxEvent' } } } },
      responses: {
        '2XX': { description: 'Delivered. Any other answer, a network error or 10 s without one is retried 3 times (after 1, 2 and 4 s)' },
      },
    },
  },
};

/** Unsent bytes a GET /events client may fall behind by before it is dropped. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/** GET /events: the lifecycle event stream (Server-Sent Events). */
export async function eventRoutes(app: App, { services, heartbeatMs }: EventRouteOptions): Promise<void> {
  const { bus, metrics } = services.observability;
  const streams = new Set<SseStream>();
  // Open streams would keep the server from closing.
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.end();
  });

  app.get(
    '/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Stream of sandbox lifecycle events (Server-Sent Events); resumable with Last-Event-ID',
        description:
          'Each event is sent as `id: <id>`, `event: <type>`, `data: <SandboxEvent JSON>` and a blank line; a `: heartbeat` ' +
          'comment comes every 15 s (--events-heartbeat). On when the server runs with --events, --webhook-url or ' +
          '--otel-endpoint; otherwise 503. A client that falls more than 1 MiB behind is disconnected.',
        querystring: eventsQuery,
        headers: eventsHeaders,
        response: {
          200: textReply('text/event-stream', 'The event stream; each `data:` line is a SandboxEvent (components/schemas/SandboxEvent)'),
          ...errors(400, 503),
        },
      },
    },
    async (request, reply) => {
      if (!bus.enabled) {
        throw new ServiceError(
          'EVENTS_DISABLED',
          'the event stream is off: start sandboxd with --events (SERVICE_EVENTS=true, [events].enabled), --webhook-url or --otel-endpoint',
        );
      }
      const types = request.query.type === undefined ? undefined : new Set<EventType>([request.query.type].flat());
      const filter = { ...(request.query.sandbox ? { sandbox: request.query.sandbox } : {}), ...(types ? { types } : {}) };
      const lastId = request.headers['last-event-id'];

      reply.hijack();
      const stream = new SseStream(reply.raw, {
        heartbeatMs,
        maxBufferedBytes: MAX_BUFFERED_BYTES,
        onSlowClient: () => metrics.eventClientsDropped.inc(),
      });
      stream.comment(`sandboxd events; latest id ${bus.lastId}`);
      const unsubscribe = bus.follow(
        filter,
        lastId === undefined ? undefined : Number(lastId),
        (published) => stream.send(published.event.id, published.event.type, published.json),
        () => stream.comment(`some events after ${lastId} are no longer in the backlog`),
      );
      streams.add(stream);
      stream.onClose(() => {
        unsubscribe();
        streams.delete(stream);
      });
    },
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const eventRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /events': { action: 'events.read', resource: (i) => `events:${text(i.query?.sandbox) ?? '*'}` },
};
