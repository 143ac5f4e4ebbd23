/**
 * The contract between the store service and the engines behind the store kinds
 * (DECISIONS-WAVE2 section 3). The service owns records, names, validation of the request
 * envelope, credentials, events, metrics and the response-size cap; an engine owns its
 * connections and speaks its database. One engine object per kind lives for the server's
 * lifetime; `open()` gives a handle per store, which the service caches and closes.
 *
 * Errors: an engine throws `ServiceError`s with the codes of section 3.4: SQL_ERROR (the
 * engine's message, `details.engine_code`), READ_ONLY, STORE_UNAVAILABLE (naming kind, store,
 * host and port, never a password), TIMEOUT, BAD_REQUEST (a refused statement or command, named),
 * PAYLOAD_TOO_LARGE (a full store), BUSY (every connection of the store stayed in use). Nothing
 * an engine throws may carry a credential. test/conformance/store-engine-conformance.ts checks
 * every engine against this contract.
 */

import type { StoreKind } from '../../../domain/store-kinds.js';

/** Every kind a store can have; the first three live on the host, the rest are external servers. */
export { STORE_KINDS, type StoreKind } from '../../../domain/store-kinds.js';

/** The three operations of the API; an engine supports `query` + `execute`, or `command`. */
export type StoreOp = 'query' | 'execute' | 'command';

/** Bound parameters: positional always; named (`:a`, `@a`, `$a`) on sqlite only. */
export type StoreParams = unknown[] | Record<string, unknown>;

/** What an engine knows of the store it opens. */
export interface StoreTarget {
  id: string;
  name: string;
  kind: StoreKind;
  /**
   * The engine's own config as its `checkConfig` returned it. Never holds the service's fields
   * (`password`, `password_env`, `read_only`); a `url` never holds a password (the service moved
   * it to `password`, so an engine puts `password` into the url's userinfo itself).
   */
  config: Record<string, unknown>;
  /** The password, decrypted or read from `password_env`; undefined when there is none. */
  password?: string;
  /** Embedded kinds on the host: the store's file (`<data-dir>/stores/<id>.sqlite`; the folder exists at `prepare`). */
  file: string;
  /** The bound sandbox's name, when the store has one. */
  sandbox?: string;
  /**
   * External kinds with no `host` in config and a bound sandbox: the sandbox's bridge address
   * (the service resolves it; 422 for a sandbox without a network).
   */
  defaultHost?: string;
  /**
   * External kinds with a host of their own: the address the service checked it resolves to
   * (store-destination.ts). The engine connects there, keeping the name for messages and TLS.
   */
  address?: string;
}

export interface QueryRequest {
  sql: string;
  params: StoreParams;
  /** Rows to return at most (read through a cursor, stop at max_rows + 1 or at MAX_RESULT_BYTES). */
  maxRows: number;
  /** The statement is cancelled on the server after this long (TIMEOUT). */
  timeoutMs: number;
}

/**
 * What the rows of one result may take as JSON: an engine stops reading once they would pass it
 * and says `truncated` (as at max_rows), so a wide result never sits whole in memory. It is also
 * the service's response cap (store-results.ts).
 */
export const MAX_RESULT_BYTES = 8 * 1024 * 1024;

/** Columns in order, rows as arrays in the same order (values already JSON-safe, section 3.4). */
export interface RowSet {
  columns: string[];
  /** The engine's type of each column (e.g. `integer`, `text`, `blob`, `int8`, `bytea`, `jsonb`). */
  column_types: string[];
  rows: unknown[][];
  /** More rows existed than maxRows. */
  truncated: boolean;
  /** What the engine warned of while it ran the statement (mysql), when it warned. */
  warnings?: EngineWarning[];
}

/** One warning or note of the engine about a statement that ran (MySQL's SHOW WARNINGS). */
export interface EngineWarning {
  level: string;
  code: number;
  message: string;
}

export interface ExecuteRequest {
  statements: { sql: string; params: StoreParams }[];
  /** All statements in one transaction (the default); false runs each in its own. */
  transaction: boolean;
  maxRows: number;
  timeoutMs: number;
}

export interface StatementResult {
  rows_affected: number;
  /** sqlite and mysql; null on postgres. Beyond 2^53 as a string. */
  last_insert_id: number | string | null;
  /** Present when the statement returned rows (RETURNING). */
  result?: RowSet;
  /** What the engine warned of while it ran the statement (mysql), when it warned. */
  warnings?: EngineWarning[];
}

export interface CommandRequest {
  /** The argv: the command name first (case-insensitive), then its arguments (any JSON on kv/queue). */
  command: unknown[];
  timeoutMs: number;
}

/** One open store. The service serialises nothing: handles must accept concurrent calls. */
export interface StoreHandle {
  query?(request: QueryRequest): Promise<RowSet>;
  execute?(request: ExecuteRequest): Promise<StatementResult[]>;
  command?(request: CommandRequest): Promise<unknown>;
  /** Embedded kinds: bytes on disk now. */
  sizeBytes?(): Promise<number>;
  /** Releases connections (pools, file handles). Idempotent. */
  close(): Promise<void>;
}

export interface StoreEngine {
  readonly kind: StoreKind;
  /** The ops this kind answers; the others are 422 UNSUPPORTED naming the right route. */
  readonly ops: readonly StoreOp[];
  /**
   * Checks a create's or patch's config; returns it normalised with defaults. It is given the
   * config without `password`, `password_env` and `read_only` (the service checks, seals and
   * enforces those) and with a url's password taken out. Throws BAD_REQUEST naming `config.<field>`.
   */
  checkConfig(config: Record<string, unknown>): Record<string, unknown>;
  open(target: StoreTarget): Promise<StoreHandle>;
  /**
   * `validate: true` at create: connects once and answers, or throws BAD_REQUEST
   * `config: cannot connect to postgres at 127.0.0.1:5433: ECONNREFUSED (create with validate: false to skip this check)`.
   * Embedded kinds create their file here.
   */
  prepare(target: StoreTarget, validate: boolean): Promise<void>;
  /** After the record is gone: embedded kinds delete their files; external kinds touch nothing remote. */
  destroy(target: StoreTarget): Promise<void>;
  /**
   * Command kinds: whether this command changes data (`SET`, `ENQUEUE`, `DEQUEUE`, `DEL`, ...).
   * A store with `config.read_only: true` answers such a command 403 FORBIDDEN before the engine
   * sees it. An unknown command counts as a write (the engine then refuses it by name).
   */
  commandWrites?(command: unknown[]): boolean;
  /** Stops background work (worker processes, sweeps) at server close. */
  shutdown?(): Promise<void>;
}
