/**
 * A child process that runs host sqlite store SQL (forked by `SqliteHostPool`, one request at
 * a time, JSON over the IPC channel). better-sqlite3 is synchronous and this build can neither
 * interrupt a statement nor report progress, so a runaway statement blocks this process, not
 * the server: the parent SIGKILLs it at the deadline and forks a new one.
 *
 * Each store has two cached connections: a read-only one for /query (the engine, not parsing,
 * keeps /query from writing) and the writer for /execute. Values leave as JSON: integers beyond
 * 2^53 as strings, BLOBs as base64 (docs/decisions.md, "sqlite stores").
 */
import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { RowSet, StatementResult } from '../../store-engine.js';
import { jsonInteger, MAX_RESULT_BYTES, READY, type WireError, type WireParams, type WireStatement, type WorkerAnswer, type WorkerRequest } from './sqlite-protocol.js';

type Connection = Database.Database;

interface StoreConnections {
  writer: Connection;
  reader: Connection;
  maxBytes: number;
  /** `changes(), last_insert_rowid(), total_changes()` of the writer. */
  counters: Database.Statement<[], [bigint, bigint, bigint]>;
}

/** Stores whose connections stay open in one worker; the least recently used one closes first. */
const MAX_OPEN_STORES = 32;
/** A WAL file is cut back to this after a checkpoint. */
const JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024;
const open = new Map<string, StoreConnections>();

class RequestError extends Error {
  constructor(readonly wire: WireError) {
    super(wire.message);
  }
}

function connections(file: string, maxBytes: number): StoreConnections {
  let store = open.get(file);
  if (store) {
    open.delete(file);
  } else {
    if (open.size >= MAX_OPEN_STORES) close(open.keys().next().value!);
    store = openStore(file);
  }
  open.set(file, store);
  if (store.maxBytes !== maxBytes) {
    // max_page_count belongs to the connection: every writer sets it; a store past it gets SQLITE_FULL.
    const pageSize = store.writer.pragma('page_size', { simple: true }) as number;
    store.writer.pragma(`max_page_count = ${Math.max(1, Math.floor(maxBytes / pageSize))}`);
    store.maxBytes = maxBytes;
  }
  return store;
}

function openStore(file: string): StoreConnections {
  const opened: Connection[] = [];
  try {
    // The writer first: a read-only connection cannot create the WAL's shared-memory file.
    const writer = new Database(file, { fileMustExist: true });
    opened.push(writer);
    writer.pragma('journal_mode = WAL');
    writer.pragma('synchronous = NORMAL');
    writer.pragma('foreign_keys = ON');
    writer.pragma('busy_timeout = 5000');
    writer.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
    // Sorts and temporary tables stay in this process's memory, not in unbounded files on the host's disk.
    writer.pragma('temp_store = MEMORY');
    const reader = new Database(file, { readonly: true, fileMustExist: true });
    opened.push(reader);
    reader.pragma('busy_timeout = 5000');
    reader.pragma('temp_store = MEMORY');
    const counters = writer.prepare<[], [bigint, bigint, bigint]>('SELECT changes(), last_insert_rowid(), total_changes()').raw(true).safeIntegers(true);
    return { writer, reader, maxBytes: -1, counters };
  } catch (err) {
    for (const db of opened) db.close();
    throw err;
  }
}

function close(file: string): void {
  const store = open.get(file);
  if (!store) return;
  open.delete(file);
  store.reader.close();
  store.writer.close();
}

/** Integers within 2^53 bind as SQLite integers (a JS number binds as a real). */
function bindable(params: WireParams): unknown[] {
  const value = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : v);
  if (Array.isArray(params)) return params.map(value);
  const named = Object.entries(params);
  return named.length === 0 ? [] : [Object.fromEntries(named.map(([k, v]) => [k, value(v)]))];
}

function prepare(db: Connection, sql: string, field: string): Database.Statement {
  try {
    return db.prepare(sql);
  } catch (err) {
    if (err instanceof RangeError && /more than one statement/.test(err.message)) {
      throw new RequestError({
        code: 'BAD_REQUEST',
        message: `${field}: holds more than one statement; send one per sql (execute takes several as statements[])`,
      });
    }
    throw err;
  }
}

/** Bytes a value adds to the JSON answer, known before it is converted (escapes and multi-byte characters count). */
function jsonBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(JSON.stringify(value), 'utf8') + 1;
  if (Buffer.isBuffer(value)) return Math.ceil(value.length / 3) * 4 + 3;
  return 24;
}

/** Reads at most `maxRows` rows (and stops at MAX_RESULT_BYTES); both set `truncated`. */
function readRows(stmt: Database.Statement, params: WireParams, maxRows: number): RowSet {
  stmt.raw(true).safeIntegers(true);
  const columns = stmt.columns().map((column) => column.name);
  // A column's type is the storage class of its first value; `blob` when any value is one.
  const types: string[] = columns.map(() => 'null');
  const rows: unknown[][] = [];
  let bytes = 0;
  let truncated = false;
  for (const raw of stmt.iterate(...bindable(params)) as Iterable<unknown[]>) {
    if (rows.length === maxRows) {
      truncated = true;
      break;
    }
    bytes += raw.reduce<number>((sum, value) => sum + jsonBytes(value), 2);
    if (bytes > MAX_RESULT_BYTES) {
      truncated = true;
      break;
    }
    rows.push(
      raw.map((value, i) => {
        if (value === null) return null;
        if (typeof value === 'bigint') {
          if (types[i] === 'null') types[i] = 'integer';
          return jsonInteger(value);
        }
        if (typeof value === 'number') {
          if (types[i] === 'null') types[i] = 'real';
          return Number.isFinite(value) ? value : null;
        }
        if (Buffer.isBuffer(value)) {
          types[i] = 'blob';
          return value.toString('base64');
        }
        if (types[i] === 'null') types[i] = 'text';
        return value;
      }),
    );
  }
  return { columns, column_types: types, rows, truncated };
}

function query(request: Extract<WorkerRequest, { op: 'query' }>): RowSet {
  const { reader } = connections(request.file, request.maxBytes);
  const stmt = prepare(reader, request.sql, 'sql');
  // A PRAGMA that reads (journal_mode) does not count as read-only to SQLite; the connection still is.
  if (!stmt.readonly && !request.pragmaRead) {
    throw new RequestError({ code: 'READ_ONLY', message: 'query: statement writes' });
  }
  try {
    if (stmt.reader) return readRows(stmt, request.params, request.maxRows);
    stmt.run(...bindable(request.params));
    return { columns: [], column_types: [], rows: [], truncated: false };
  } finally {
    if (reader.inTransaction) reader.prepare('ROLLBACK').run();
  }
}

function runStatement(store: StoreConnections, statement: WireStatement, field: string, maxRows: number): StatementResult {
  const stmt = prepare(store.writer, statement.sql, field);
  const before = store.counters.get()![2];
  let result: RowSet | undefined;
  if (stmt.reader) result = readRows(stmt, statement.params, maxRows);
  else stmt.run(...bindable(statement.params));
  const [changes, rowid, total] = store.counters.get()!;
  // changes() keeps the count of the last statement that changed rows: only a change in the total is this statement's.
  const rowsAffected = total === before ? 0 : Number(changes);
  return {
    rows_affected: rowsAffected,
    last_insert_id: statement.inserts && rowsAffected > 0 ? jsonInteger(rowid) : null,
    ...(result ? { result } : {}),
  };
}

function execute(request: Extract<WorkerRequest, { op: 'execute' }>): StatementResult[] {
  const store = connections(request.file, request.maxBytes);
  const batch = request.statements.length > 1;
  let index = 0;
  const runAll = () =>
    request.statements.map((statement, i) => {
      index = i;
      return runStatement(store, statement, batch ? `statements[${i}].sql` : 'sql', request.maxRows);
    });
  try {
    // One statement needs no transaction of ours (and VACUUM cannot run inside one).
    return batch && request.transaction ? store.writer.transaction(runAll).immediate() : runAll();
  } catch (err) {
    throw batch && !(err instanceof RequestError) ? Object.assign(err as object, { statement: index }) : err;
  } finally {
    if (store.writer.inTransaction) store.writer.prepare('ROLLBACK').run();
  }
}

function wireError(err: unknown): WireError {
  if (err instanceof RequestError) return err.wire;
  const statement = (err as { statement?: number }).statement;
  const at = statement === undefined ? {} : { statement };
  const prefix = statement === undefined ? '' : `statements[${statement}]: `;
  if (err instanceof Database.SqliteError) {
    if (err.code === 'SQLITE_FULL') return { code: 'PAYLOAD_TOO_LARGE', message: `${prefix}${err.message}`, engine_code: err.code, ...at };
    return { code: 'SQL_ERROR', message: `${prefix}${err.message}`, engine_code: err.code, ...at };
  }
  // better-sqlite3 reports parameters that do not fit the statement as RangeError / TypeError.
  if (err instanceof RangeError || err instanceof TypeError) {
    return { code: 'BAD_REQUEST', message: `${statement === undefined ? 'params' : `statements[${statement}].params`}: ${err.message}`, ...at };
  }
  return { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

function answer(request: WorkerRequest): WorkerAnswer {
  try {
    if (request.op === 'query') return { id: request.id, ok: true, value: query(request) };
    if (request.op === 'execute') return { id: request.id, ok: true, value: execute(request) };
    close(request.file);
    return { id: request.id, ok: true, value: null };
  } catch (err) {
    return { id: request.id, ok: false, error: wireError(err) };
  }
}

/**
 * A thread that ends this process once its parent is gone: the main thread may be stuck in a
 * statement that never ends, and nothing else would stop it after the server died.
 */
function watchParent(): void {
  const source = `
    const { workerData } = require('node:worker_threads');
    setInterval(() => { if (process.ppid !== workerData) process.kill(process.pid, 'SIGKILL'); }, 1000);
  `;
  new Worker(source, { eval: true, workerData: process.ppid }).unref();
}

/**
 * Makes this process the first the kernel's OOM killer ends: a statement that eats memory (a
 * huge sort, a giant blob) then costs this worker (answered 503, replaced), not the server.
 */
function offerToOomKiller(): void {
  try {
    writeFileSync('/proc/self/oom_score_adj', '1000');
  } catch {
    // Not Linux, or /proc is not mounted: the kernel's own choice stands.
  }
}

process.on('message', (request: WorkerRequest) => process.send!(answer(request)));
process.on('disconnect', () => process.exit(0));
watchParent();
offerToOomKiller();
process.send!(READY);
