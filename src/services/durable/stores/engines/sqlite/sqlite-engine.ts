/**
 * The `sqlite` store kind (docs/decisions.md, "sqlite stores"). A store lives in
 * `<data-dir>/stores/<id>.sqlite` on the host, where its SQL runs in the worker processes of
 * `SqliteHostPool` behind the checks of `sql-guard.ts`; or, bound to a sandbox with
 * `config.path`, in that file inside the sandbox, through the sandbox's python3.
 */
import Database from 'better-sqlite3';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { badRequest, isServiceError } from '../../../../../errors.js';
import type { Logger } from '../../../../../telemetry/logger.js';
import { checkHostStatement, statementShape } from './sql-guard.js';
import { SqliteHostPool, type PoolRequest } from './sqlite-host-pool.js';
import { storeError, wireParams, type WireStatement } from './sqlite-protocol.js';
import { runInSandbox, type SandboxExec, type SandboxFile } from './sqlite-sandbox.js';
import type { ExecuteRequest, QueryRequest, RowSet, StatementResult, StoreEngine, StoreHandle, StoreTarget } from '../../store-engine.js';

export const DEFAULT_SQLITE_MAX_BYTES = 256 * 1024 * 1024;
const MIN_MAX_BYTES = 64 * 1024;
const MAX_MAX_BYTES = 2 ** 40;
const MAX_PATH_LENGTH = 4096;
const CONFIG_FIELDS = ['max_bytes', 'path', 'read_only'];

export interface SqliteEngineInput {
  /** Worker processes for host stores (`--store-workers`); default 2. */
  workers?: number;
  /** Runs a command in a sandbox: `ExecService.exec` (stores with `config.path`). */
  exec: SandboxExec;
  logger: Logger;
}

export class SqliteStoreEngine implements StoreEngine {
  readonly kind = 'sqlite' as const;
  readonly ops = ['query', 'execute'] as const;
  private readonly pool: SqliteHostPool;
  private readonly exec: SandboxExec;

  constructor({ workers = 2, exec, logger }: SqliteEngineInput) {
    this.pool = new SqliteHostPool(workers, logger.child({ component: 'sqlite-store-workers' }));
    this.exec = exec;
  }

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    for (const field of Object.keys(config)) {
      if (!CONFIG_FIELDS.includes(field)) throw badRequest(`config.${field}: unknown field; a sqlite store takes ${CONFIG_FIELDS.join(', ')}`);
    }
    const { max_bytes = DEFAULT_SQLITE_MAX_BYTES, path, read_only } = config;
    if (typeof max_bytes !== 'number' || !Number.isInteger(max_bytes) || max_bytes < MIN_MAX_BYTES || max_bytes > MAX_MAX_BYTES) {
      throw badRequest(`config.max_bytes: must be a whole number of bytes from ${MIN_MAX_BYTES} to ${MAX_MAX_BYTES}`);
    }
    if (path !== undefined) {
      if (typeof path !== 'string' || !path.startsWith('/') || path.endsWith('/') || path.length > MAX_PATH_LENGTH || /[\0\n\r]/.test(path)) {
        throw badRequest(`config.path: must be the absolute path of a file in the sandbox (at most ${MAX_PATH_LENGTH} characters)`);
      }
    }
    if (read_only !== undefined && typeof read_only !== 'boolean') throw badRequest('config.read_only: must be true or false');
    return { max_bytes, ...(path !== undefined ? { path } : {}), ...(read_only !== undefined ? { read_only } : {}) };
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    const file = sandboxFile(target);
    return file ? new SandboxSqliteHandle(this.exec, file) : new HostSqliteHandle(this.pool, target);
  }

  async prepare(target: StoreTarget, validate: boolean): Promise<void> {
    const file = sandboxFile(target);
    if (file) {
      if (validate) await openInSandbox(this.exec, file);
      return;
    }
    await mkdir(dirname(target.file), { recursive: true, mode: 0o700 });
    // WAL is a property of the file: set once here, before any worker opens it.
    const db = new Database(target.file);
    try {
      db.pragma('journal_mode = WAL');
    } finally {
      db.close();
    }
  }

  /** Deletes a host store's file; a sandbox's file belongs to the program in the sandbox and stays. */
  async destroy(target: StoreTarget): Promise<void> {
    if (sandboxFile(target)) return;
    this.pool.closeFile(target.file);
    await Promise.all(hostFiles(target.file).map((file) => rm(file, { force: true })));
  }

  async shutdown(): Promise<void> {
    await this.pool.shutdown();
  }
}

/** A store bound to a sandbox with `config.path` lives in the sandbox; BAD_REQUEST for a path without one. */
function sandboxFile(target: StoreTarget): SandboxFile | undefined {
  const path = target.config.path;
  if (path === undefined) return undefined;
  if (!target.sandbox) {
    throw badRequest('config.path: only a store bound to a sandbox has a path (its file inside the sandbox); a host store lives in the data directory');
  }
  return { name: target.name, sandbox: target.sandbox, path: path as string, maxBytes: maxBytesOf(target) };
}

/** Creates a sandbox store's file when missing and proves it is a database; 400 naming config.path when not. */
async function openInSandbox(exec: SandboxExec, file: SandboxFile): Promise<void> {
  try {
    await runInSandbox(exec, file, { op: 'open', timeout_ms: 10_000 });
  } catch (err) {
    if (!(isServiceError(err) && err.code === 'SQL_ERROR')) throw err;
    throw badRequest(
      `config.path: '${file.path}' in sandbox '${file.sandbox}' cannot be opened as a sqlite database: ${err.message} (create with validate: false to skip this check)`,
      { details: err.details },
    );
  }
}

const maxBytesOf = (target: StoreTarget) => (target.config.max_bytes as number | undefined) ?? DEFAULT_SQLITE_MAX_BYTES;
const hostFiles = (file: string) => [file, `${file}-wal`, `${file}-shm`];

/** The statements of an execute request, checked, with their parameters as SQLite binds them. */
function wireStatements(request: ExecuteRequest, host: boolean): WireStatement[] {
  const batch = request.statements.length > 1;
  return request.statements.map(({ sql, params }, i) => {
    const field = batch ? `statements[${i}].sql` : 'sql';
    const { verb } = statementShape(sql, field);
    if (host) checkHostStatement(sql, field);
    return { sql, params: wireParams(params), inserts: verb === 'INSERT' || verb === 'REPLACE' };
  });
}

class HostSqliteHandle implements StoreHandle {
  private readonly label: string;

  constructor(
    private readonly pool: SqliteHostPool,
    private readonly target: StoreTarget,
  ) {
    this.label = `sqlite store '${target.name}'`;
  }

  async query(request: QueryRequest): Promise<RowSet> {
    const { pragmaRead } = statementShape(request.sql, 'sql');
    checkHostStatement(request.sql, 'sql');
    const value = await this.run(
      { op: 'query', file: this.target.file, maxBytes: maxBytesOf(this.target), sql: request.sql, params: wireParams(request.params), maxRows: request.maxRows, pragmaRead },
      request.timeoutMs,
    );
    return value as RowSet;
  }

  async execute(request: ExecuteRequest): Promise<StatementResult[]> {
    const statements = wireStatements(request, true);
    const value = await this.run(
      { op: 'execute', file: this.target.file, maxBytes: maxBytesOf(this.target), statements, transaction: request.transaction, maxRows: request.maxRows },
      request.timeoutMs,
      this.target.file,
    );
    return value as StatementResult[];
  }

  async sizeBytes(): Promise<number> {
    const sizes = await Promise.all(hostFiles(this.target.file).map((file) => stat(file).then((s) => s.size, () => 0)));
    return sizes.reduce((sum, size) => sum + size, 0);
  }

  async close(): Promise<void> {
    this.pool.closeFile(this.target.file);
  }

  private async run(request: PoolRequest, timeoutMs: number, exclusive?: string) {
    const answer = await this.pool.run(request, { timeoutMs, label: this.label, ...(exclusive ? { exclusive } : {}) });
    if (!answer.ok) throw storeError(answer.error, this.target.name);
    return answer.value;
  }
}

class SandboxSqliteHandle implements StoreHandle {
  constructor(
    private readonly exec: SandboxExec,
    private readonly file: SandboxFile,
  ) {}

  async query(request: QueryRequest): Promise<RowSet> {
    statementShape(request.sql, 'sql');
    return runInSandbox(this.exec, this.file, {
      op: 'query',
      sql: request.sql,
      params: wireParams(request.params),
      max_rows: request.maxRows,
      timeout_ms: request.timeoutMs,
    });
  }

  async execute(request: ExecuteRequest): Promise<StatementResult[]> {
    return runInSandbox(this.exec, this.file, {
      op: 'execute',
      statements: wireStatements(request, false),
      transaction: request.transaction,
      max_rows: request.maxRows,
      timeout_ms: request.timeoutMs,
    });
  }

  async close(): Promise<void> {
    // Each request is its own process in the sandbox: nothing stays open.
  }
}
