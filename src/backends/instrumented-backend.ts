import type { Metrics } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Backend, ExecRequest } from './backend.js';

/**
 * The engine operations that are timed and traced (all return promises). Every other member
 * (`name`, `capabilities`, `close`, and operations not listed yet) passes through untouched,
 * so that a new operation is never changed behind its author's back: list it here.
 */
const OBSERVED = new Set<PropertyKey>([
  'ping',
  'ensureImage',
  'create',
  'claim',
  'start',
  'stop',
  'remove',
  'inspect',
  'list',
  'exec',
  'readFile',
  'writeFile',
  'deleteFile',
  'startDetached',
  'listDetached',
  'detachedLogs',
  'killDetached',
  'snapshot',
  'archive',
  'removeImage',
  'listImages',
  'resize',
] satisfies (keyof Backend)[]);

/**
 * The one decorator that observes a backend (docs/decisions.md, "Code rules"): every operation is timed
 * into `sandboxd_backend_operation_duration_seconds`, and, with tracing on, runs in a child
 * span `backend.<operation>` of the request's span. Commands run by `exec` receive
 * TRACEPARENT and TRACESTATE of their span in their environment; a value the caller set
 * explicitly in the exec request wins. A Proxy, so that members added to the Backend
 * interface later pass through without touching this file.
 */
export function instrumentBackend(inner: Backend, metrics: Metrics, tracing?: Tracing): Backend {
  const observe = async <T>(operation: string, args: unknown[], call: (args: unknown[]) => Promise<T>): Promise<T> => {
    const started = performance.now();
    let outcome = 'error';
    try {
      const result = tracing
        ? await tracing.inSpan(`backend.${operation}`, { 'sandboxd.backend': inner.name, 'sandboxd.backend.operation': operation }, () =>
            call(operation === 'exec' ? withTraceEnv(args, tracing) : args),
          )
        : await call(args);
      outcome = 'ok';
      return result;
    } finally {
      metrics.backendDuration.observe({ operation, outcome }, (performance.now() - started) / 1000);
    }
  };

  return new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (!OBSERVED.has(property)) return value.bind(target);
      return (...args: unknown[]) => observe(String(property), args, (actual) => value.apply(target, actual) as Promise<unknown>);
    },
  });
}

/** exec's arguments with the active span's trace context added to the request's env. */
function withTraceEnv(args: unknown[], tracing: Tracing): unknown[] {
  const [id, request, ...rest] = args as [string, ExecRequest, ...unknown[]];
  return [id, { ...request, env: { ...tracing.environment(), ...request.env } }, ...rest];
}
