import { ServiceError, STATUS_BY_CODE, type ErrorCode } from '../errors.js';

/** One call of the HTTP/JSON API, as the tools describe it. */
export interface ApiRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path with its parameters already encoded, e.g. `/sandboxes/demo/exec` (see `apiPath`). */
  path: string;
  /** Query parameters; an array repeats the parameter. */
  query?: Record<string, string | string[]>;
  body?: unknown;
}

/**
 * How the MCP tools reach the service: always through the HTTP/JSON API, so that both ways
 * of running (in-process, or against a running `sandboxd serve`) share every code path:
 * validation, auth, the service layer and the error table. `request` resolves with the
 * envelope's `data` (or a bare body, as the browser routes send) and throws a ServiceError with the envelope's code and message.
 */
export interface ApiClient {
  /** Where requests go, for logs and messages: `in-process (<data-dir>)` or a URL. */
  readonly target: string;
  request<T = unknown>(request: ApiRequest, signal?: AbortSignal): Promise<T>;
}

/** A path from literal segments and parameters: `apiPath('sandboxes', name, 'exec')`. */
export function apiPath(...segments: string[]): string {
  return segments.map((segment) => `/${encodeURIComponent(segment)}`).join('');
}

/** The path of a file inside a sandbox, each segment encoded: `/workspace/a b` -> `workspace/a%20b`. */
export function filePath(name: string, path: string): string {
  const segments = path.split('/').filter(Boolean).map(encodeURIComponent);
  return `${apiPath('sandboxes', name, 'files')}/${segments.join('/')}`;
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
  let body: { success?: boolean; data?: T; error?: string; code?: string } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // handled below: not JSON
  }
  if (body?.success === true) return body.data as T;
  if (body && typeof body.error === 'string') {
    const code = body.code && body.code in STATUS_BY_CODE ? (body.code as ErrorCode) : 'INTERNAL';
    throw new ServiceError(code, body.error);
  }
  // The browser routes answer with bare bodies (docs/decisions.md, "Transport"): a success that is not an envelope.
  if (body !== undefined && status < 300) return body as T;
  throw new ServiceError('INTERNAL', `unexpected reply (HTTP ${status}): ${text.slice(0, 200)}`);
}
