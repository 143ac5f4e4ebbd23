/**
 * What the external engines (postgres, mysql, redis) share besides their config: the errors
 * they throw, which never tell the password from anything else; the deadline that answers
 * TIMEOUT and starts the server-side cancel; and turning parameters and values between JSON
 * and the drivers.
 */
import { ServiceError, badRequest } from '../../../../../errors.js';
import { hostPort, type Endpoint, type ExternalKind } from './external-config.js';
import type { StoreParams } from '../../store-engine.js';
import { MAX_JSON_DEPTH, TOO_DEEP } from '../../../../../domain/json-depth.js';

/**
 * `text` with every occurrence of the password (as given and url-encoded) replaced by `****`.
 * Only for text that holds nothing a caller chose (a driver's own message about a connection):
 * masking the password in text a caller wrote would tell them which of their words was the
 * password (docs/decisions.md, "Store errors never show caller text beside a masked password").
 */
export function scrub(text: string, password: string | undefined): string {
  if (!password) return text;
  let out = text;
  for (const form of new Set([password, encodeURIComponent(password)])) out = out.split(form).join('****');
  return out;
}

/**
 * A driver's connection message with every quoted part (`"..."`, `'...'`, `` `...` ``)
 * replaced by `…` inside its quotes (a user, a database, a host the caller named), masked
 * whatever it is before the password is scrubbed, so that nothing in the answer tells which
 * of the caller's words was the password.
 */
function maskQuoted(message: string): string {
  return message.replace(/"[^"]*"|'[^']*'|`[^`]*`/g, (quoted) => `${quoted[0]}…${quoted[0]}`);
}

/** What a refused login or connection says, by the server's code, without the names it would quote. */
const SERVER_REASONS: Record<string, string> = {
  // PostgreSQL SQLSTATEs.
  '28P01': 'password authentication failed',
  '28000': 'the server refused the login (pg_hba.conf, or a role that may not log in)',
  '3D000': 'the database does not exist',
  '53300': 'too many connections',
  '57P01': 'the server is shutting down',
  '57P02': 'the server is shutting down',
  '57P03': 'the server is starting up or shutting down',
  // MySQL / MariaDB error names.
  ER_ACCESS_DENIED_ERROR: 'access denied: wrong user or password',
  ER_DBACCESS_DENIED_ERROR: 'the user may not use the database',
  ER_BAD_DB_ERROR: 'the database does not exist',
  ER_CON_COUNT_ERROR: 'too many connections',
  ER_TOO_MANY_USER_CONNECTIONS: 'too many connections for the user',
  ER_HOST_IS_BLOCKED: 'this host is blocked by the server',
  ER_HOST_NOT_PRIVILEGED: 'this host may not connect to the server',
  // Redis replies.
  WRONGPASS: 'wrong user or password',
  NOAUTH: 'the server wants a password',
  LOADING: 'the server is loading its data',
  MASTERDOWN: 'the server has lost its master',
};

/**
 * The short reason of a connection failure, never quoting what the server or the caller
 * chose: the system's or TLS code (`ECONNREFUSED`, `ERR_TLS_CERT_ALTNAME_INVALID`), the
 * server's code with a fixed reason (`28P01: password authentication failed`), or else the
 * driver's own message, its quoted parts masked and the password scrubbed.
 */
export function connectReason(err: unknown, password: string | undefined): string {
  // Our own words (a deadline that passed): as they are.
  if (err instanceof ServiceError) return err.message;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error && err.message !== '' ? err.message : String(err);
  // A PostgreSQL SQLSTATE: five characters, digits among them.
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && /\d/.test(code)) {
    return `${code}: ${SERVER_REASONS[code] ?? 'the server refused the connection'}`;
  }
  if (typeof code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(code)) {
    const reason = SERVER_REASONS[code];
    return reason === undefined ? code : `${code}: ${reason}`;
  }
  return scrub(maskQuoted(message), password);
}

/** 503 STORE_UNAVAILABLE: `postgres store 'x' at 127.0.0.1:5432: ECONNREFUSED`. */
export function storeUnavailable(kind: ExternalKind, store: string, endpoint: Endpoint, err: unknown): ServiceError {
  return new ServiceError(
    'STORE_UNAVAILABLE',
    `${kind} store '${store}' at ${hostPort(endpoint)}: ${connectReason(err, endpoint.password)}`,
  );
}

/** 400 at create with `validate: true`: the store's server cannot be reached or refused the credentials. */
export function cannotConnect(kind: ExternalKind, endpoint: Endpoint, err: unknown): ServiceError {
  return badRequest(
    `config: cannot connect to ${kind} at ${hostPort(endpoint)}: ${connectReason(err, endpoint.password)} ` +
      '(create with validate: false to skip this check)',
  );
}

/**
 * 400 SQL_ERROR: the engine refused the caller's statement; its message as the engine wrote it
 * (`column "nope" does not exist`: what it quotes is what the caller sent, which the caller
 * needs to mend the statement), and its code. Neither scrubbed nor masked: anything of the
 * password in it was sent by the caller, and masking it would be an oracle.
 */
export function engineError(message: string, details: Record<string, unknown>): ServiceError {
  return new ServiceError('SQL_ERROR', message, { details });
}

/** 400 READ_ONLY: `/query` ran a statement the engine refused in its read-only transaction. */
export function readOnlyError(engineCode: unknown): ServiceError {
  return new ServiceError('READ_ONLY', 'query: statement writes', {
    hint: { action: 'store_execute' },
    details: { engine_code: engineCode },
  });
}

/** How many connections a postgres or mysql store holds at most. */
export const POOL_SIZE = 4;

/**
 * No connection came within `timeout_ms`: 429 BUSY when all of the store's connections were
 * in use (the calls before this one hold them), else 503 (the server does not answer).
 */
export function noConnection(kind: ExternalKind, store: string, endpoint: Endpoint, inUse: number, timeoutMs: number): ServiceError {
  if (inUse >= POOL_SIZE) {
    return new ServiceError('BUSY', `${kind} store '${store}': all ${POOL_SIZE} connections stayed busy for timeout_ms (${timeoutMs} ms)`);
  }
  return storeUnavailable(kind, store, endpoint, new Error(`no connection within timeout_ms (${timeoutMs} ms)`));
}

/** 504 TIMEOUT after `timeout_ms`. */
export function timeoutError(kind: ExternalKind, timeoutMs: number): ServiceError {
  return new ServiceError('TIMEOUT', `${kind}: the statement was cancelled after timeout_ms (${timeoutMs} ms)`);
}

/**
 * How much later than `timeout_ms` the server's own statement limit fires. The client timer
 * answers at `timeout_ms` and cancels the statement from a side connection; the server's
 * limit is the backstop for when that side connection cannot be had.
 */
export const SERVER_TIMEOUT_GRACE_MS = 5_000;

/**
 * Runs `work` against a deadline. At `timeoutMs` it calls `onExpire` (which starts the
 * server-side cancel) and rejects with `expiredError()` at once, without waiting for the
 * server: a hung server must not hold the caller. `work` keeps running in the background;
 * it reads `expired()` before each step that would commit, and its late outcome is dropped.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  work: (expired: () => boolean) => Promise<T>,
  onExpire: () => void,
  expiredError: () => ServiceError,
): Promise<T> {
  let expired = false;
  let timer: NodeJS.Timeout | undefined;
  const running = work(() => expired);
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      onExpire();
      reject(expiredError());
    }, timeoutMs);
  });
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
    running.catch(() => undefined);
  }
}

const PLACEHOLDERS: Record<'postgres' | 'mysql', string> = { postgres: '$1, $2, ...', mysql: '?' };

/**
 * Positional parameters for a SQL engine: null, numbers, strings and booleans as they are,
 * objects and arrays as JSON text (the drivers would otherwise turn an array into an engine
 * array literal or a list). Named parameters are a sqlite feature: BAD_REQUEST naming `params`.
 */
export function positionalParams(kind: 'postgres' | 'mysql', params: StoreParams): unknown[] {
  if (!Array.isArray(params)) {
    throw badRequest(`params: a ${kind} store takes positional params (${PLACEHOLDERS[kind]}), not an object`);
  }
  return params.map((value) => (value !== null && typeof value === 'object' ? JSON.stringify(value) : value));
}

/** Bytes a driver's row takes in a result's JSON, with the comma before the next row. */
export function rowJsonBytes(row: unknown[]): number {
  return Buffer.byteLength(JSON.stringify(jsonValue(row)), 'utf8') + 1;
}

/**
 * A driver's value made JSON-safe: bytes as base64, dates as ISO strings, big integers as
 * strings (numbers when exact), infinities and NaN as strings; arrays and objects walked, to
 * MAX_JSON_DEPTH levels (a JSON value of the database's nested deeper is a 400 that says to
 * select it as text, never a walk that overflows the stack).
 */
export function jsonValue(value: unknown, depth = 0): unknown {
  if (value === null || value === undefined) return null;
  if (depth > MAX_JSON_DEPTH) throw badRequest(`a value of the result is ${TOO_DEEP}: select it as text (e.g. CAST(x AS TEXT), x::text)`);
  if (Buffer.isBuffer(value)) return value.toString('base64');
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (Array.isArray(value)) return value.map((inner) => jsonValue(inner, depth + 1));
  if (typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, jsonValue(inner, depth + 1)]));
  }
  return value;
}
