import { AsyncLocalStorage } from 'node:async_hooks';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

export { SpanKind, type Attributes, type Context, type Span };

export interface TracingOptions {
  /** OTLP/HTTP collector: a base URL (`/v1/traces` is appended) or the full traces URL. */
  endpoint: string;
  version: string;
}

/** The OTLP/HTTP traces URL of a collector given by its base URL or its full traces URL. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/traces')) url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.toString();
}

/**
 * Trace export for one server: a tracer provider of its own (never the global one, so that
 * several servers in one process stay apart), spans batched and sent as OTLP/HTTP JSON, and
 * the active trace context carried through async calls by an AsyncLocalStorage. W3C trace
 * context (`traceparent`, `tracestate`) comes in on requests and goes out to commands.
 */
export class Tracing {
  readonly tracer: Tracer;
  private readonly provider: BasicTracerProvider;
  private readonly storage = new AsyncLocalStorage<Context>();
  private readonly propagator = new W3CTraceContextPropagator();

  constructor({ endpoint, version }: TracingOptions) {
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'sandboxd', [ATTR_SERVICE_VERSION]: version }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl(endpoint) }))],
    });
    this.tracer = this.provider.getTracer('sandboxd', version);
  }

  /** The context of incoming headers: their `traceparent` span as parent, if valid. */
  extract(headers: Record<string, string | string[] | undefined>): Context {
    return this.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  }

  /** The context active in the current async flow. */
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  /** Runs `fn` (and everything it starts) with `context` active. */
  runWith<T>(context: Context, fn: () => T): T {
    return this.storage.run(context, fn);
  }

  /** `context` with `span` as its active span. */
  withSpan(context: Context, span: Span): Context {
    return trace.setSpan(context, span);
  }

  /**
   * Runs `fn` in a child span of the active context; the span ends with fn's outcome and is
   * the active span inside fn.
   */
  async inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, this.active());
    try {
      return await this.runWith(this.withSpan(this.active(), span), () => fn(span));
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * TRACEPARENT and TRACESTATE of the active span, as environment variables of a command;
   * TRACESTATE is empty when the trace carries no vendor state. Nothing outside a span.
   */
  environment(): Record<string, string> {
    const carrier: Record<string, string> = {};
    this.propagator.inject(this.active(), carrier, defaultTextMapSetter);
    return carrier.traceparent ? { TRACEPARENT: carrier.traceparent, TRACESTATE: carrier.tracestate ?? '' } : {};
  }

  /** Marks a span failed (5xx answers, errors). */
  static fail(span: Span, message: string): void {
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  /** Exports every span still buffered, then stops. */
  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}
