/**
 * What the sqlite engine sends to where SQL runs (a worker process on the host, or the python
 * script in a sandbox) and what comes back. Both speak JSON, so parameters travel in a JSON-safe
 * form and every answer holds JSON-safe values (docs/decisions.md, "sqlite stores").
 */
import { ServiceError, type ErrorCode } from '../../../../../errors.js';
import type { RowSet, StatementResult, StoreParams } from '../../store-engine.js';

/** A result stops growing here (`truncated`); it is also the service's response cap. */
export { MAX_RESULT_BYTES } from '../../store-engine.js';

/** A parameter as SQLite binds it: booleans and objects are already converted. */
export type WireValue = null | number | string;
export type WireParams = WireValue[] | Record<string, WireValue>;

export interface WireStatement {
  sql: string;
  params: WireParams;
  /** An INSERT or REPLACE: its last_insert_id is meaningful. */
  inserts: boolean;
}

export type WorkerRequest =
  | { id: number; op: 'query'; file: string; maxBytes: number; sql: string; params: WireParams; maxRows: number; pragmaRead: boolean }
  | { id: number; op: 'execute'; file: string; maxBytes: number; statements: WireStatement[]; transaction: boolean; maxRows: number }
  /** Forget the store's connections (the handle closed or the store is being deleted). */
  | { id: number; op: 'close'; file: string };

/** A failure as the place that ran the SQL reports it; `statement` is the failing index of a batch. */
export interface WireError {
  code: ErrorCode;
  message: string;
  engine_code?: string;
  statement?: number;
}

export type WorkerAnswer = { id: number; ok: true; value: RowSet | StatementResult[] | null } | { id: number; ok: false; error: WireError };

/** The worker's first message, once it can take requests. */
export const READY = 'ready';

/**
 * Params as SQLite binds them (section 3.4 of the store contract): booleans 1/0, objects and
 * arrays as JSON text; named keys lose a leading `:`, `@` or `$` (the name is the same).
 */
export function wireParams(params: StoreParams): WireParams {
  if (Array.isArray(params)) return params.map(wireValue);
  return Object.fromEntries(Object.entries(params).map(([key, value]) => [key.replace(/^[:@$]/, ''), wireValue(value)]));
}

function wireValue(value: unknown): WireValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number' || typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** The JSON form of an integer SQLite returned: a number when exact, else its decimal string. */
export function jsonInteger(value: bigint): number | string {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
}

/** The service's error for a failure the worker or the sandbox reported about store `name`. */
export function storeError(error: WireError, name: string): ServiceError {
  const details = {
    ...(error.engine_code ? { engine_code: error.engine_code } : {}),
    ...(error.statement !== undefined ? { statement: error.statement } : {}),
  };
  const extras = Object.keys(details).length > 0 ? { details } : {};
  if (error.code === 'READ_ONLY') return new ServiceError('READ_ONLY', 'query: statement writes', { ...extras, hint: { action: 'store_execute', store: name } });
  if (error.code === 'TIMEOUT') return new ServiceError('TIMEOUT', `sqlite store '${name}': ${error.message}`);
  if (error.code === 'PAYLOAD_TOO_LARGE') {
    return new ServiceError('PAYLOAD_TOO_LARGE', `sqlite store '${name}' is full (config.max_bytes): ${error.message}`, extras);
  }
  return new ServiceError(error.code, error.message, extras);
}
