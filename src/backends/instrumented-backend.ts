import type { Metrics } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import type {
  ArchiveCapability,
  Backend,
  BrowserRelayCapability,
  DetachedCapability,
  ExecRequest,
  PoolClaimCapability,
  ResizeCapability,
  SnapshotCapability,
  WorkersCapability,
  FileViewsCapability,
  VolumesCapability,
} from './backend.js';

/**
 * The engine operations that are timed and traced (all return promises), those of the core and
 * those of every capability. Every other member (`name`, `runtimes`, `close`, and operations
 * not listed yet) passes through untouched, so that a new operation is never changed behind its
 * author's back: list it here.
 */
const OBSERVED = new Set<PropertyKey>([
  ...(['ping', 'ensureImage', 'create', 'start', 'stop', 'remove', 'inspect', 'list', 'exec', 'readFile', 'readFileStream', 'writeFile', 'deleteFile'] satisfies (keyof Backend)[]),
  ...(['snapshot', 'removeImage', 'listImages'] satisfies (keyof SnapshotCapability)[]),
  ...(['archive'] satisfies (keyof ArchiveCapability)[]),
  ...(['resize'] satisfies (keyof ResizeCapability)[]),
  ...(['claim'] satisfies (keyof PoolClaimCapability)[]),
  ...(['startDetached', 'listDetached', 'detachedLogs', 'killDetached'] satisfies (keyof DetachedCapability)[]),
  ...(['relay'] satisfies (keyof BrowserRelayCapability)[]),
  ...(['ensureWorker', 'callWorker', 'stopWorker', 'listWorkers'] satisfies (keyof WorkersCapability)[]),
  ...(['listDirectory', 'stat'] satisfies (keyof FileViewsCapability)[]),
  ...(['createVolume', 'listVolumes', 'inspectVolume', 'removeVolume'] satisfies (keyof VolumesCapability)[]),
]);

/**
 * The one decorator that observes a backend (docs/decisions.md, "Code rules"): every operation, of the core and
 * of each capability the backend declares, is timed into
 * `sandboxd_backend_operation_duration_seconds`, and, with tracing on, runs in a child span
 * `backend.<operation>` of the request's span. Commands run by `exec` receive TRACEPARENT and
 * TRACESTATE of their span in their environment; a value the caller set explicitly in the exec
 * request wins. Proxies, so that members added to the interfaces later pass through without
 * touching this file; the capabilities are read from the backend at each access, so that a
 * backend may declare or omit one at any time (the fake does).
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

  /** `target` with its listed operations observed; any other member as it is. */
  const observed = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property, object) as unknown;
        if (typeof value !== 'function') return value;
        if (!OBSERVED.has(property)) return value.bind(object);
        return (...args: unknown[]) => observe(String(property), args, (actual) => value.apply(object, actual) as Promise<unknown>);
      },
    });

  const wrapped = new WeakMap<object, object>();
  const capabilities = new Proxy(inner.capabilities, {
    get(object, property) {
      const capability = Reflect.get(object, property, object) as unknown;
      if (typeof capability !== 'object' || capability === null) return capability;
      if (!wrapped.has(capability)) wrapped.set(capability, observed(capability));
      return wrapped.get(capability);
    },
  });

  const backend = observed(inner);
  return new Proxy(backend, {
    get(object, property) {
      return property === 'capabilities' ? capabilities : Reflect.get(object, property);
    },
  });
}

/** exec's arguments with the active span's trace context added to the request's env. */
function withTraceEnv(args: unknown[], tracing: Tracing): unknown[] {
  const [id, request, ...rest] = args as [string, ExecRequest, ...unknown[]];
  return [id, { ...request, env: { ...tracing.environment(), ...request.env } }, ...rest];
}
