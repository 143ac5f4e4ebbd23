import { existsSync, readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { ServiceError } from '../../errors.js';
import { unwrap, urlOf, type ApiClient, type ApiRequest } from '../../mcp/api-client.js';
import { httpClient } from '../../mcp/http-client.js';
import { ConfigError, loadConfig } from '../../config/load-config.js';
import { trustFor } from '../server-trust.js';
import { UsageError } from './output.js';
import { openWebSocket } from './websocket.js';
import type WebSocket from 'ws';

/** The global flags of the client commands (accepted anywhere before `--`, see global-flags.ts). */
export interface GlobalFlags {
  server?: string;
  apiKey?: string;
  json: boolean;
}

/** Where the client commands send their requests, and how. */
export interface Connection {
  /** JSON calls: the envelope's data, or a ServiceError with the server's message and next step. */
  api: ApiClient;
  base: string;
  /** A request whose reply is read as a stream (SSE, raw bytes); a non-2xx reply is thrown as a ServiceError. */
  open(request: ApiRequest & { rawBody?: Buffer; accept?: string }, signal?: AbortSignal): Promise<IncomingMessage>;
  /** A WebSocket to `path` (with its query), authenticated as every request; a refusal is thrown as a ServiceError. */
  webSocket(path: string): Promise<WebSocket>;
}

/** What a person should do about a refused key, in the words of the command line. */
const KEY_ADVICE = "give sandboxd the server's key with --api-key or SERVICE_API_KEY";

/**
 * The server of the client commands: `--server`, else SERVICE_URL, else the URL in the local
 * server's `<data-dir>/server.json` (while the process that wrote it lives), else this host's
 * configured port (http://127.0.0.1:18888 by default). The key: `--api-key`, else the first
 * configured one (SERVICE_API_KEY, SERVICE_API_KEY_FILE).
 */
export function connect(flags: GlobalFlags, env: NodeJS.ProcessEnv = process.env): Connection {
  const config = configFrom(env);
  const apiKey = flags.apiKey ?? config.apiKeys[0];
  const base = (flags.server ?? (env.SERVICE_URL || undefined) ?? localServerUrl(config.dataDir) ?? `http://127.0.0.1:${config.port}`).replace(/\/+$/, '');
  const { ca } = trustFor(base, config.dataDir);
  return {
    api: httpClient(base, { apiKey, ...(ca ? { ca } : {}), unauthorizedAdvice: KEY_ADVICE }),
    base,
    open: (request, signal) => openStream(base, request, { apiKey, ca, signal }),
    webSocket: (path) => openWebSocket(base, path, { apiKey, ca, keyAdvice: KEY_ADVICE }),
  };
}

/** The settings the client reads (data directory, port, keys); a bad one is a usage error naming it. */
function configFrom(env: NodeJS.ProcessEnv) {
  try {
    return loadConfig({ env });
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/** The URL a live local server wrote into server.json; undefined without one. */
function localServerUrl(dataDir: string): string | undefined {
  const file = join(dataDir, 'server.json');
  if (!existsSync(file)) return undefined;
  try {
    const info = JSON.parse(readFileSync(file, 'utf8')) as { url?: unknown; pid?: unknown };
    if (typeof info.url !== 'string') return undefined;
    return typeof info.pid !== 'number' || alive(info.pid) ? info.url : undefined;
  } catch {
    // half-written or unreadable: fall back to the configured port
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function openStream(
  base: string,
  { method, body, rawBody, accept, headers: extra, ...rest }: ApiRequest & { rawBody?: Buffer; accept?: string },
  { apiKey, ca, signal }: { apiKey: string | undefined; ca: string[] | undefined; signal: AbortSignal | undefined },
): Promise<IncomingMessage> {
  const url = new URL(base + urlOf({ method, ...rest }));
  const payload = rawBody ?? (body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
  const headers = {
    ...extra,
    ...(accept ? { accept } : {}),
    ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    ...(payload ? { 'content-type': rawBody ? 'application/octet-stream' : 'application/json' } : {}),
  };
  let response: IncomingMessage;
  try {
    response = await new Promise<IncomingMessage>((resolve, reject) => {
      const options = { method, headers, ...(signal ? { signal } : {}) };
      const req = url.protocol === 'https:' ? httpsRequest(url, { ...options, ...(ca ? { ca } : {}) }, resolve) : httpRequest(url, options, resolve);
      req.on('error', reject);
      req.end(payload);
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new ServiceError('BACKEND_UNAVAILABLE', `cannot reach the sandboxd server at ${base} (${(err as Error).message}): check that \`sandboxd serve\` is running there`);
  }
  const status = response.statusCode ?? 0;
  if (status >= 200 && status < 300) return response;
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  try {
    unwrap(status, Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'UNAUTHORIZED') throw new ServiceError('UNAUTHORIZED', `${err.message}: ${KEY_ADVICE}`);
    throw err;
  }
  throw new ServiceError('INTERNAL', `unexpected reply (HTTP ${status})`);
}

/** One Server-Sent Event. */
export interface SseEvent {
  event: string;
  id?: string;
  data: string;
}

/** The events of an SSE response, as they arrive; comments (heartbeats) are skipped. */
export async function* sseEvents(response: AsyncIterable<Buffer | string>): AsyncGenerator<SseEvent> {
  let buffer = '';
  let event: SseEvent = { event: 'message', data: '' };
  let hasData = false;
  for await (const chunk of response) {
    buffer += chunk.toString();
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, '');
      buffer = buffer.slice(newline + 1);
      if (line === '') {
        if (hasData) yield event;
        event = { event: 'message', data: '' };
        hasData = false;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event.event = value;
      else if (field === 'id') event.id = value;
      else if (field === 'data') {
        event.data = hasData ? `${event.data}\n${value}` : value;
        hasData = true;
      }
    }
  }
}
