import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/config-schema.js';
import { httpClient } from '../client/http-client.js';
import type { ApiClient } from '../client/api-client.js';
import { injectClient } from '../client/inject-client.js';
import { startRuntime } from '../runtime.js';
import { DataDirLockedError } from '../state/data-dir-lock.js';
import type { Logger } from '../telemetry/logger.js';
import { trustFor } from './server-trust.js';

/** The API the MCP tools work through, and what to close when the session ends. */
export interface McpTarget {
  api: ApiClient;
  close(): Promise<void>;
}

/** How long to wait for a server that holds the lock but has not written server.json yet (it is starting). */
const SERVER_FILE_WAIT_MS = 10_000;

/** The data directory is owned by a process the MCP server cannot work through. */
export class McpTargetError extends Error {
  override readonly name = 'McpTargetError';
}

/** How long the probe of a local server waits for its answer. */
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Where `sandboxd mcp` works: the server at `serverUrl` when one is given; else the service
 * hosted in-process on the data directory; else, when a `sandboxd serve` already owns the
 * data directory, that server's HTTP API (its URL from `<data-dir>/server.json`). Either way
 * the tools see the same sandboxes as every other client of the data directory. Where the
 * in-process service cannot reach its engine (a user who may not use the Docker socket, beside
 * a server run as root on a data directory they cannot read), the server that answers on this
 * host's configured port (http://127.0.0.1:18888 by default) is used; without one, McpTargetError
 * says how to point at a server.
 */
export async function openMcpTarget(config: Config, logger: Logger, serverUrl?: string): Promise<McpTarget> {
  // The key given to this command (flag, environment, key file, [api].api_key), else the first
  // [[api.keys]] entry: in-process, every tool call is a request of that key's principal.
  const apiKey = config.apiKeys[0] ?? config.namedKeys[0]?.key;
  if (serverUrl) {
    if (!apiKey) await warnIfKeyNeeded(serverUrl, logger);
    return { api: httpClient(serverUrl, { apiKey }), close: async () => undefined };
  }
  try {
    const runtime = await startRuntime(config, logger, { listen: false });
    const unreachable = await runtime.services.backend.ping().then(
      () => undefined,
      (err: unknown) => (err as Error).message,
    );
    if (unreachable === undefined) {
      return { api: injectClient(runtime.app, `in-process (${config.dataDir})`, apiKey), close: () => runtime.close() };
    }
    await runtime.close();
    const local = `http://127.0.0.1:${config.port}`;
    if (await isSandboxd(local)) {
      logger.warn({ server: local, reason: unreachable }, 'the sandbox engine is out of reach here: working through the server on this host');
      return { api: httpClient(local, { apiKey }), close: async () => undefined };
    }
    throw new McpTargetError(
      `cannot host sandboxd here (${unreachable}) and no sandboxd server answers at ${local}: ` +
        'point this at a running server with --server URL (or SANDBOXD_URL), start one with `sandboxd serve`, ' +
        'or run this as a user who may use the Docker socket',
    );
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    const url = await waitForServerUrl(config.dataDir, err.ownerPid);
    if (!url) {
      throw new McpTargetError(
        `data directory ${config.dataDir} is in use by another sandboxd process` +
          (err.ownerPid ? ` (pid ${err.ownerPid})` : '') +
          ' that serves no HTTP API: stop it, point this one at a server with --server URL, or give it its own --data-dir',
      );
    }
    return { api: httpClient(url, { apiKey, ...trustFor(url, config.dataDir) }), close: async () => undefined };
  }
}

/**
 * Says at start, not at every call, that the server at `base` wants a key this command was not
 * given (GET /status, open without a key, tells). Says nothing when the server cannot be
 * reached: each call then says so itself.
 */
async function warnIfKeyNeeded(base: string, logger: Logger): Promise<void> {
  try {
    const response = await fetch(`${base}/status`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const body = (await response.json()) as { data?: { api_key_configured?: unknown } };
    if (body.data?.api_key_configured === true) {
      logger.warn({ server: base }, "the server needs an API key and none was given: every tool call will be refused; give it with --api-key or SANDBOXD_API_KEY");
    }
  } catch {
    // unreachable or not sandboxd: the calls say so
  }
}

/** Whether a sandboxd server answers GET /status (open without a key) at `base`. */
async function isSandboxd(base: string): Promise<boolean> {
  try {
    const response = await fetch(`${base}/status`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const body = (await response.json()) as { success?: boolean; data?: { version?: unknown; backend?: unknown } };
    return response.ok && body.success === true && typeof body.data?.version === 'string' && typeof body.data.backend === 'string';
  } catch {
    return false;
  }
}

/** The URL in server.json once the lock owner (by pid) has written it; undefined if it does not in time. */
async function waitForServerUrl(dataDir: string, ownerPid: number | undefined): Promise<string | undefined> {
  const file = join(dataDir, 'server.json');
  const deadline = Date.now() + SERVER_FILE_WAIT_MS;
  for (;;) {
    if (existsSync(file)) {
      try {
        const info = JSON.parse(readFileSync(file, 'utf8')) as { url?: string; pid?: number };
        if (info.url && (ownerPid === undefined || info.pid === ownerPid)) return info.url;
      } catch {
        // half-written: read it again
      }
    }
    if (Date.now() > deadline || (ownerPid !== undefined && !alive(ownerPid))) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
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
