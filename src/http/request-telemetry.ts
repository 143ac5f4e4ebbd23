import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from '../telemetry/metrics.js';
import { SpanKind, Tracing, type Context, type Span } from '../telemetry/tracing.js';

/** Route label of requests that matched no route, so that raw paths never become labels. */
const UNMATCHED = 'unmatched';
/** Status label of a request whose client left before any answer was sent (nginx's convention). */
const CLIENT_GONE = 499;

/**
 * Per-request observation in one place (docs/decisions.md, "Code rules"): every request, 401s and 404s
 * included, is counted and timed by method, route template and status; with tracing on it
 * gets a server span (child of an incoming `traceparent`) that is active while the handler
 * runs, so backend spans and exec's TRACEPARENT descend from it. Registered before auth, so
 * that rejected requests are observed too. A response's `close` ends the observation, which
 * also covers streams (GET /events) and clients that leave early.
 */
export function registerRequestTelemetry(app: FastifyInstance, metrics: Metrics, tracing?: Tracing): void {
  const contexts = new WeakMap<FastifyRequest, Context>();

  app.addHook('onRequest', (request, reply, done) => {
    const started = performance.now();
    const route = request.routeOptions.url ?? UNMATCHED;
    let span: Span | undefined;
    if (tracing) {
      const parent = tracing.extract(request.headers);
      const attributes = { [ATTR_HTTP_REQUEST_METHOD]: request.method, [ATTR_HTTP_ROUTE]: route, [ATTR_URL_PATH]: request.url.split('?')[0] };
      span = tracing.tracer.startSpan(`${request.method} ${route}`, { kind: SpanKind.SERVER, attributes }, parent);
      contexts.set(request, tracing.withSpan(parent, span));
    }

    reply.raw.once('close', () => {
      const status = reply.raw.headersSent ? reply.statusCode : CLIENT_GONE;
      const labels = { method: request.method, route, status: String(status) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
      if (!span) return;
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (status >= 500) Tracing.fail(span, `HTTP ${status}`);
      span.end();
    });
    done();
  });

  // The handler runs inside the request's trace context.
  if (tracing) {
    app.addHook('preHandler', (request, _reply, done) => {
      const context = contexts.get(request);
      if (context) tracing.runWith(context, done);
      else done();
    });
  }
}
