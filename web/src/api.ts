/**
 * Every call the dashboard makes to the sandboxd API: the key (when auth is on) goes with each
 * one, kept in sessionStorage for this browser session; a 401 asks for it again and retries.
 */

import type { BodyArgument, Method, Operation, Reply, Schema } from './api-types';

const KEY_ITEM = 'sandboxd.apiKey';

/** A refused call: the reply's status, the envelope's message and code, and the operation that was called. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = '',
    readonly operation = '',
  ) {
    super(message);
  }
}

/** Shows the key form and resolves with what the person typed; set once by the app. */
let askForKey: (reason: string) => Promise<string> = () => Promise.reject(new Error('no key form'));

export function onKeyNeeded(ask: (reason: string) => Promise<string>): void {
  askForKey = ask;
}

export const storedKey = (): string | null => sessionStorage.getItem(KEY_ITEM);

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM);
}

/** One question at a time: the calls that need a key while it is being asked all wait on it. */
let asking: Promise<string> | undefined;
function ask(reason: string): Promise<string> {
  asking ??= askForKey(reason).finally(() => (asking = undefined));
  return asking;
}

/**
 * GET /status (open to all): whether the server wants a key, whether its event stream is on,
 * what its backend can do. Asked once per page; a failed ask is asked again next time.
 */
let status: Promise<Partial<Reply<'getStatus'>>> | undefined;
export const serverStatus = (): Promise<Partial<Reply<'getStatus'>>> =>
  (status ??= fetch('/status')
    .then((r) => r.json() as Promise<{ data?: Partial<Reply<'getStatus'>> }>)
    .then((body) => body.data ?? {})
    .catch(() => ((status = undefined), {})));

/** Whether a feature of the backend is there (a route of one it lacks answers 422). */
export const hasCapability = async (name: Schema<'ServerStatus'>['capabilities'][number]): Promise<boolean> => (await serverStatus()).capabilities?.includes(name) ?? false;

/** Whether the server wants a key: asked before the first call, so no call is refused for want of one. */
const needsKey = async () => (await serverStatus()).api_key_configured === true;

/** Sends a request with the key; on 401 asks for a key (once per failure) and sends it again. */
export async function authorizedFetch(path: string, init: RequestInit = {}): Promise<Response> {
  if (!storedKey() && (await needsKey())) sessionStorage.setItem(KEY_ITEM, await ask('This server needs an API key.'));
  for (;;) {
    const key = storedKey();
    const headers = new Headers(init.headers);
    if (key) headers.set('authorization', `Bearer ${key}`);
    const response = await fetch(path, { ...init, headers });
    if (response.status !== 401) return response;
    const reason = key ? 'That key was refused: enter a valid API key.' : 'This server needs an API key.';
    if (storedKey() === key) {
      forgetKey();
      sessionStorage.setItem(KEY_ITEM, await ask(reason));
    }
  }
}

/** The reply's error as a message: the envelope's `error` where there is one. */
async function failure(response: Response, operation = ''): Promise<ApiError> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as Partial<Schema<'Error'>>;
    return new ApiError(response.status, body.error ?? text, body.code, operation);
  } catch {
    return new ApiError(response.status, text || response.statusText, '', operation);
  }
}

/** A JSON call: the reply's body as it is, or an ApiError carrying its message. */
async function json(operation: Operation, method: string, path: string, body: unknown): Promise<unknown> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const response = await authorizedFetch(path, init);
  if (!response.ok) throw await failure(response, operation);
  return response.json();
}

/**
 * A JSON call of `operation` (its operationId in the OpenAPI document) at `path` (the route
 * with its parameters filled in): the envelope's `data`, or an ApiError carrying its message.
 * The method, the body and the reply are typed by the operation (api-types.ts).
 */
export async function api<O extends Operation>(operation: O, method: Method<O>, path: string, ...[body]: BodyArgument<O>): Promise<Reply<O>> {
  return ((await json(operation, method, path, body)) as { data: Reply<O> }).data;
}

/** A call of a route whose reply is a bare body, not an envelope (the browser routes). */
export async function bareApi<O extends Operation>(operation: O, method: Method<O>, path: string, ...[body]: BodyArgument<O>): Promise<Reply<O>> {
  return (await json(operation, method, path, body)) as Reply<O>;
}

/** A file's bytes as they are. */
export async function download(path: string): Promise<Blob> {
  const response = await authorizedFetch(path, { headers: { accept: 'application/octet-stream' } });
  if (!response.ok) throw await failure(response);
  return response.blob();
}

export async function upload(path: string, bytes: Blob): Promise<void> {
  const response = await authorizedFetch(path, { method: 'PUT', body: bytes, headers: { 'content-type': 'application/octet-stream' } });
  if (!response.ok) throw await failure(response);
}

/** Plain text (the Prometheus exposition of /metrics). */
export async function text(path: string): Promise<string> {
  const response = await authorizedFetch(path);
  if (!response.ok) throw await failure(response);
  return response.text();
}

export interface ServerSentEvent {
  event: string;
  data: unknown;
}

/**
 * Server-Sent Events over fetch: EventSource cannot send an Authorization header. Yields each
 * event with its data parsed as JSON, until the stream ends or `signal` aborts.
 */
export async function* events(path: string, signal: AbortSignal, init: RequestInit = {}): AsyncGenerator<ServerSentEvent> {
  const response = await authorizedFetch(path, { ...init, signal, headers: { ...init.headers, accept: 'text/event-stream' } });
  if (!response.ok || !response.body) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
        }
        if (data.length) yield { event, data: JSON.parse(data.join('\n')) as unknown };
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** A path segment, encoded; a file path keeps its slashes. */
export const enc = encodeURIComponent;
export const encPath = (path: string) => path.replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/');
