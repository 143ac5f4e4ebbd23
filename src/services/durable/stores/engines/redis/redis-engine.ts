/**
 * The `redis` store kind: a Redis server reached with `@redis/client`, one multiplexed
 * connection per store (opened on first use, `config.db` selected at connect, closed after
 * it has been idle). `/command` takes an argv; commands outside the allow-list of
 * `redis-commands.ts` (plus `config.allow_commands`) are refused by name before they reach
 * the server. Replies are RESP values as JSON: bulk strings that are UTF-8 as strings, other
 * bytes as `{"$base64": ...}`, which is also how a client sends a binary argument.
 */
import { isUtf8 } from 'node:buffer';
import { createClient, ErrorReply, RESP_TYPES } from '@redis/client';
import { badRequest, ServiceError } from '../../../../../errors.js';
import { checkExternalConfig, checkInteger, connectTarget, resolveEndpoint, type Endpoint, type ExternalSpec, type ExternalEngineOptions } from '../external/external-config.js';
import { cannotConnect, engineError, storeUnavailable, withDeadline } from '../external/external-errors.js';
import { commandName, commandWrites, NEVER_ALLOWED, refusal } from './redis-commands.js';
import type { CommandRequest, StoreEngine, StoreHandle, StoreTarget } from '../../store-engine.js';

/** What a redis store's config holds (see external-config.ts). */
export const REDIS_SPEC: ExternalSpec = {
  kind: 'redis',
  schemes: { 'redis:': false, 'rediss:': true },
  defaultPort: 6379,
  tlsField: 'tls',
  extraFields: {
    db: (value, name) => checkInteger(value, name, 0, 65535),
    allow_commands: checkAllowCommands,
  },
};

function checkAllowCommands(value: unknown, name: string): string[] {
  if (!Array.isArray(value) || value.length > 200) throw badRequest(`${name}: must be a list of at most 200 command names`);
  return value.map((command, index) => {
    const upper = commandName([command]);
    if (upper === undefined) throw badRequest(`${name}[${index}]: must be a redis command name`);
    if (NEVER_ALLOWED.has(upper)) {
      throw badRequest(`${name}[${index}]: '${upper}' cannot be allowed (it blocks or changes the store's shared connection)`);
    }
    return upper;
  });
}

export class RedisEngine implements StoreEngine {
  readonly kind = 'redis' as const;
  readonly ops = ['command'] as const;

  constructor(private readonly options: ExternalEngineOptions = {}) {}

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    return checkExternalConfig(REDIS_SPEC, config);
  }

  commandWrites(command: unknown[]): boolean {
    return commandWrites(command);
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    const allowed = new Set((target.config.allow_commands as string[] | undefined) ?? []);
    return new RedisHandle(target.name, resolveEndpoint(REDIS_SPEC, target), allowed, this.options);
  }

  async prepare(target: StoreTarget, validate: boolean): Promise<void> {
    const endpoint = resolveEndpoint(REDIS_SPEC, target);
    if (!validate) return;
    const client = newClient(endpoint, this.options);
    const limitMs = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    try {
      // The socket's connect timeout does not cover the handshake (AUTH, SELECT) a hung server never answers.
      await withDeadline(
        limitMs,
        async () => {
          await client.connect();
          await client.sendCommand(['PING']);
        },
        () => undefined,
        () => badRequest(`no answer within ${limitMs} ms`),
      );
    } catch (err) {
      throw cannotConnect('redis', endpoint, withReplyCode(err));
    } finally {
      client.destroy();
    }
  }

  async destroy(): Promise<void> {
    // An external store's data belongs to its server; forgetting the record touches nothing there.
  }
}

const CONNECT_TIMEOUT_MS = 10_000;

function newClient(endpoint: Endpoint, options: ExternalEngineOptions) {
  const { host, tls } = connectTarget(endpoint);
  const client = createClient({
    socket: {
      host,
      port: endpoint.port,
      connectTimeout: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      // A lost connection is not retried in the background: the next command connects anew,
      // and a command meanwhile fails at once instead of waiting in an offline queue.
      reconnectStrategy: false,
      ...(tls ? { tls: true as const, ...tls } : {}),
    },
    ...(endpoint.user === undefined ? {} : { username: endpoint.user }),
    ...(endpoint.password === undefined ? {} : { password: endpoint.password }),
    database: endpoint.database === undefined ? 0 : Number(endpoint.database),
    RESP: 2,
    disableOfflineQueue: true,
    // Strings as bytes (binary-safe) and integers as text (exact beyond 2^53); `jsonReply` then
    // tells them apart by their JavaScript type.
  }).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer, [RESP_TYPES.SIMPLE_STRING]: Buffer, [RESP_TYPES.NUMBER]: String });
  client.on('error', () => undefined);
  return client;
}

type Client = ReturnType<typeof newClient>;

/** How long closing waits for replies still due before it drops the connection. */
const CLOSE_PATIENCE_MS = 1_000;

/** The reply errors that mean the server will not serve this store now. */
const UNAVAILABLE_REPLIES = new Set(['NOAUTH', 'WRONGPASS', 'LOADING', 'MASTERDOWN']);

/**
 * A reply error that refuses the connection (WRONGPASS, NOAUTH...) as an error with that
 * code, so that its reason is told by the code, not by the server's words.
 */
function withReplyCode(err: unknown): unknown {
  if (!(err instanceof ErrorReply)) return err;
  const code = err.message.split(' ', 1)[0] ?? '';
  return UNAVAILABLE_REPLIES.has(code) ? Object.assign(new Error(code), { code }) : err;
}

class RedisHandle implements StoreHandle {
  /** The connection: the client at once (to close it), and the promise that it is ready. */
  #connection: { client: Client; ready: Promise<Client> } | undefined;
  #idle: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    private readonly store: string,
    private readonly endpoint: Endpoint,
    private readonly allowed: ReadonlySet<string>,
    private readonly options: ExternalEngineOptions,
  ) {}

  async command(request: CommandRequest): Promise<unknown> {
    const refused = refusal(request.command, this.allowed);
    if (refused) throw badRequest(refused);
    const argv = request.command.map(redisArgument);
    const reply = await withDeadline(
      request.timeoutMs,
      async () => {
        const client = await this.#connected();
        try {
          return await client.sendCommand(argv);
        } catch (err) {
          throw this.#error(err, client);
        } finally {
          this.#armIdle();
        }
      },
      // Redis runs one command at a time and cannot cancel it; blocking commands are refused,
      // so a late answer is only a slow one, and it is dropped. A connection still not ready
      // is dropped too, so that the next command connects anew instead of waiting on it.
      () => {
        if (this.#connection && !this.#connection.client.isReady) void this.#disconnect();
      },
      () =>
        new ServiceError(
          'TIMEOUT',
          `redis: '${commandName(request.command)}' did not answer within timeout_ms (${request.timeoutMs} ms)`,
        ),
    );
    return jsonReply(reply);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#idle);
    await this.#disconnect();
  }

  /** The store's connection, opened on first use and again after it was lost or idled out. */
  #connected(): Promise<Client> {
    if (this.#closed) return Promise.reject(storeUnavailable('redis', this.store, this.endpoint, new Error('store closed')));
    if (!this.#connection) {
      const client = newClient(this.endpoint, this.options);
      const ready: Promise<Client> = client.connect().then(
        () => client,
        (err: unknown) => {
          this.#forget(client);
          client.destroy();
          throw storeUnavailable('redis', this.store, this.endpoint, withReplyCode(err));
        },
      );
      client.on('end', () => this.#forget(client));
      this.#connection = { client, ready };
    }
    return this.#connection.ready;
  }

  #forget(client: Client): void {
    if (this.#connection?.client === client) this.#connection = undefined;
  }

  #armIdle(): void {
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => void this.#disconnect(), this.options.idleMs ?? 300_000);
    this.#idle.unref();
  }

  /**
   * Closes the connection: gracefully when it is ready (replies still due are awaited for a
   * moment), at once when it is still connecting or the server does not answer.
   */
  async #disconnect(): Promise<void> {
    const client = this.#connection?.client;
    this.#connection = undefined;
    if (!client?.isOpen) return;
    if (!client.isReady) {
      client.destroy();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const patience = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), CLOSE_PATIENCE_MS);
    });
    const outcome = await Promise.race([client.close().catch(() => 'late' as const), patience]);
    clearTimeout(timer);
    if (outcome === 'late' && client.isOpen) client.destroy();
  }

  #error(err: unknown, client: Client): ServiceError {
    if (err instanceof ErrorReply) {
      const code = err.message.split(' ', 1)[0] ?? '';
      if (UNAVAILABLE_REPLIES.has(code)) return storeUnavailable('redis', this.store, this.endpoint, withReplyCode(err));
      return engineError(err.message, { engine_code: code });
    }
    // The connection broke: forget it so that the next command connects anew.
    if (!client.isReady) {
      this.#forget(client);
      if (client.isOpen) client.destroy();
    }
    return storeUnavailable('redis', this.store, this.endpoint, err);
  }
}

/** One argv element for the server: strings as they are, numbers as text, `{"$base64": ...}` as bytes. */
function redisArgument(value: unknown, index: number): string | Buffer {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const base64 = (value as { $base64?: unknown }).$base64;
    if (keys.length === 1 && typeof base64 === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(base64)) {
      return Buffer.from(base64, 'base64');
    }
  }
  throw badRequest(`command[${index}]: a redis argument is a string, a number or {"$base64": "..."}`);
}

/**
 * A RESP reply as JSON: UTF-8 strings as strings, other bytes as `{"$base64": ...}`, integers
 * (which arrive as text, see `newClient`) as numbers, or as strings beyond 2^53.
 */
function jsonReply(reply: unknown): unknown {
  if (Buffer.isBuffer(reply)) return isUtf8(reply) ? reply.toString('utf8') : { $base64: reply.toString('base64') };
  if (typeof reply === 'string') return Number.isSafeInteger(Number(reply)) ? Number(reply) : reply;
  if (Array.isArray(reply)) return reply.map(jsonReply);
  if (reply === undefined) return null;
  return reply;
}
