import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { ApiClient } from '../../client/api-client.js';
import { httpClient } from '../../client/http-client.js';
import { openStream, type StreamRequest } from '../../client/open-stream.js';
import { openWebSocket } from '../../client/websocket.js';
import { ConfigError, loadConfig } from '../../config/load-config.js';
import { trustFor } from '../server-trust.js';
import { UsageError } from './output.js';
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
  open(request: StreamRequest, signal?: AbortSignal): Promise<IncomingMessage>;
  /** A WebSocket to `path` (with its query), authenticated as every request; a refusal is thrown as a ServiceError. */
  webSocket(path: string): Promise<WebSocket>;
}

/** What a person should do about a refused key, in the words of the command line. */
const KEY_ADVICE = "give sandboxd the server's key with --api-key or SERVICE_API_KEY";

/**
 * The server of the client commands: `--server`, else SANDBOXD_URL or SERVICE_URL, else the URL in the local
 * server's `<data-dir>/server.json` (while the process that wrote it lives), else this host's
 * configured port (http://127.0.0.1:18888 by default). The key: `--api-key`, else the first
 * configured one (SANDBOXD_API_KEY or SERVICE_API_KEY, and the key file).
 */
export function connect(flags: GlobalFlags, env: NodeJS.ProcessEnv = process.env): Connection {
  const config = configFrom(env);
  const apiKey = flags.apiKey ?? config.apiKeys[0];
  const base = (flags.server ?? (env.SANDBOXD_URL || env.SERVICE_URL || undefined) ?? localServerUrl(config.dataDir) ?? `http://127.0.0.1:${config.port}`).replace(/\/+$/, '');
  const { ca } = trustFor(base, config.dataDir);
  return {
    api: httpClient(base, { apiKey, ...(ca ? { ca } : {}), unauthorizedAdvice: KEY_ADVICE }),
    base,
    open: (request, signal) => openStream(base, request, { apiKey, ca, signal, unauthorizedAdvice: KEY_ADVICE }),
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
