import { ServiceError, STATUS_BY_CODE, type ErrorCode, type ErrorExtras } from '../errors.js';
import { nextStep } from '../schemas/error-schemas.js';

/** One call of the HTTP/JSON API, as the tools describe it. */
export interface ApiRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path with its parameters already encoded, e.g. `/sandboxes/demo/exec` (see `apiPath`). */
  path: string;
  /** Query parameters; an array repeats the parameter. */
  query?: Record<string, string | string[]>;
  body?: unknown;
  /** Extra request headers (e.g. Idempotency-Key). */
  headers?: Record<string, string>;
}

/**
 * How the MCP tools reach the service: always through the HTTP/JSON API, so that both ways
 * of running (in-process, or against a running `sandboxd serve`) share every code path:
 * validation, auth, the service layer and the error table. `request` resolves with the
 * envelope's `data` (or a bare body, as the browser routes send) and throws a ServiceError
 * with the envelope's code, message, next step and details.
 */
export interface ApiClient {
  /** Where requests go, for logs and messages: `in-process (<data-dir>)` or a URL. */
  readonly target: string;
  request<T = unknown>(request: ApiRequest, signal?: AbortSignal): Promise<T>;
  /**
   * A route that answers Server-Sent Events: `onEvent` gets each event's name and parsed data
   * as it arrives; a refusal before the stream throws as `request` does.
   */
  stream(request: ApiRequest, onEvent: (event: string, data: unknown) => void, signal?: AbortSignal): Promise<void>;
}

/** A path from literal segments and parameters: `apiPath('sandboxes', name, 'exec')`. */
export function apiPath(...segments: string[]): string {
  return segments.map((segment) => `/${encodeURIComponent(segment)}`).join('');
}

/**
 * The route of a file inside a sandbox, each segment encoded: `/workspace/a b` ->
 * `files//workspace/a%20b`. An absolute path keeps its leading slash, so that the route takes
 * it as absolute whatever its first directory (it takes `files/app/x` as /workspace/app/x).
 */
export function filePath(name: string, path: string): string {
  const segments = path.split('/').filter(Boolean).map(encodeURIComponent);
  return `${apiPath('sandboxes', name, 'files')}/${path.startsWith('/') ? '/' : ''}${segments.join('/')}`;
}

/** `path?k=v&k=w` from a request. */
export function urlOf(request: ApiRequest): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(request.query ?? {})) {
    for (const item of [value].flat()) params.append(key, item);
  }
  const query = params.toString();
  return query ? `${request.path}?${query}` : request.path;
}

/** The `data` of a success envelope (or a bare JSON success body); a ServiceError for an error envelope or a non-JSON reply. */
export function unwrap<T>(status: number, text: string): T {
  let body: (ErrorEnvelope & { success?: boolean; data?: T }) | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // handled below: not JSON
  }
  if (body?.success === true) return body.data as T;
  if (body && typeof body.error === 'string') throw errorOf(body as ErrorEnvelope & { error: string });
  // The browser routes answer with bare bodies (docs/decisions.md, "Transport"): a success that is not an envelope.
  if (body !== undefined && status < 300) return body as T;
  throw new ServiceError('INTERNAL', `unexpected reply (HTTP ${status}): ${text.slice(0, 200)}`);
}

/** An error envelope as it arrives; every field but `error` is checked before use. */
interface ErrorEnvelope {
  error?: string;
  code?: string;
  problem?: unknown;
  hint?: unknown;
  details?: unknown;
}

/**
 * The ServiceError an error envelope stands for. With a next step this client knows, the
 * message is `problem` and the step travels as data, for the face to say in its own words;
 * otherwise (a server of another version) the message is `error` as the server wrote it.
 */
function errorOf(body: ErrorEnvelope & { error: string }): ServiceError {
  const code = body.code && body.code in STATUS_BY_CODE ? (body.code as ErrorCode) : 'INTERNAL';
  const extras: ErrorExtras = {};
  if (typeof body.details === 'object' && body.details !== null && !Array.isArray(body.details)) {
    extras.details = body.details as Record<string, unknown>;
  }
  const step = nextStep.safeParse(body.hint);
  if (step.success && typeof body.problem === 'string') return new ServiceError(code, body.problem, { ...extras, hint: step.data });
  return new ServiceError(code, body.error, extras);
}
