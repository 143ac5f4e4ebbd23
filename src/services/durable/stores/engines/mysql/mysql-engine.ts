/**
 * The `mysql` store kind: a MySQL or MariaDB server reached with `mysql2`, a pool of at most
 * four connections per store. Statements are prepared (`execute`), so parameters are always
 * bound, and `multipleStatements` stays off, so a `;`-stacked second statement is a syntax
 * error. `/query` runs in a read-only session and `START TRANSACTION READ ONLY`, where the
 * server refuses writes (DDL included).
 * Rows stream in and the read stops at max_rows + 1, or once their JSON would pass
 * MAX_RESULT_BYTES.
 *
 * Warnings: a statement read whole whose own end packet counted warnings (the OK header's, or
 * the EOF after its rows) is followed by `SHOW WARNINGS`, which says what the server changed or
 * cut without failing (REPEAT past max_allowed_packet is NULL with warning 1301), answered as
 * `warnings`. The count must be the statement's own: a session keeps its last warnings until a
 * statement that uses a table, so `SELECT 1` after a warning would show that warning again.
 *
 * Timeouts: a client timer answers TIMEOUT at `timeout_ms` whatever the server does and sends
 * `KILL QUERY <thread>` from a side connection; the session's `max_statement_time` (MariaDB)
 * or `max_execution_time` (MySQL, SELECT only), a little longer, lets the server stop the
 * statement itself should that fail.
 */
import mysql from 'mysql2';
import type { FieldPacket, Pool, PoolConnection, QueryError, ResultSetHeader } from 'mysql2';
import { ServiceError } from '../../../../../errors.js';
import { ExternalSqlEngine } from '../external/external-engine.js';
import { checkText, connectTarget, type Endpoint, type ExternalSpec, type ExternalEngineOptions } from '../external/external-config.js';
import {
  engineError,
  jsonValue,
  noConnection,
  POOL_SIZE,
  positionalParams,
  readOnlyError,
  rowJsonBytes,
  SERVER_TIMEOUT_GRACE_MS,
  storeUnavailable,
  timeoutError,
  withDeadline,
} from '../external/external-errors.js';
import {
  MAX_RESULT_BYTES,
  type EngineWarning,
  type ExecuteRequest,
  type QueryRequest,
  type RowSet,
  type StatementResult,
  type StoreHandle,
} from '../../store-engine.js';

/** What a mysql store's config holds (see external-config.ts). */
export const MYSQL_SPEC: ExternalSpec = {
  kind: 'mysql',
  schemes: { 'mysql:': false, 'mariadb:': false },
  defaultPort: 3306,
  defaultUser: 'root',
  tlsField: 'ssl',
  extraFields: { database: (value, name) => checkText(value, name, 64) },
};

export class MysqlEngine extends ExternalSqlEngine {
  readonly kind = 'mysql' as const;

  constructor(options: ExternalEngineOptions = {}) {
    super(MYSQL_SPEC, options);
  }

  protected handleFor(name: string, endpoint: Endpoint): StoreHandle {
    return new MysqlHandle(name, endpoint, this.options);
  }

  protected async ping(endpoint: Endpoint): Promise<void> {
    const connection = mysql.createConnection(connectionConfig(endpoint, this.options));
    connection.on('error', () => undefined);
    try {
      await new Promise<void>((resolve, reject) => connection.query('SELECT 1', (err) => (err ? reject(err) : resolve())));
    } finally {
      connection.destroy();
    }
  }
}

function connectionConfig(endpoint: Endpoint, options: ExternalEngineOptions): mysql.ConnectionOptions {
  return {
    // mysql2 sends no server name for an address; it does not check the certificate's name either.
    host: connectTarget(endpoint).host,
    port: endpoint.port,
    user: endpoint.user,
    password: endpoint.password ?? '',
    database: endpoint.database,
    ...(endpoint.tls ? { ssl: endpoint.tls as mysql.SslOptions } : {}),
    connectTimeout: options.connectTimeoutMs ?? 10_000,
    multipleStatements: false,
    // Dates as the server writes them: no conversion through the server's or our time zone.
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    charset: 'utf8mb4',
    // Prepared statements are cached per connection; the server caps them for all clients.
    maxPreparedStatements: 64,
  };
}

const ER_UNSUPPORTED_PS = 1295;
const ER_READ_ONLY_TRANSACTION = 1792;
/** MariaDB's max_statement_time, MySQL's max_execution_time, and KILL QUERY. */
const TIMED_OUT = new Set([1969, 3024, 1317]);
/** Access denied, unknown database, too many connections, host not allowed or blocked. */
const UNAVAILABLE = new Set([1040, 1044, 1045, 1049, 1129, 1130, 1203]);

/** Rows of one statement (or, for a statement without rows, its header). */
interface StatementRows {
  fields: FieldPacket[];
  rows: unknown[][];
  truncated: boolean;
  rowCount: number;
  header: ResultSetHeader | undefined;
  /** The read stopped early and the connection was closed to stop the server sending. */
  closed: boolean;
  /** The warnings the statement's last packet counted. */
  warningCount: number;
  warnings?: EngineWarning[];
}

class MysqlHandle implements StoreHandle {
  readonly #pool: Pool;
  #mariadb: boolean | undefined;
  /** Pool connections held by calls now (all of them: a waiting call that times out is BUSY). */
  #inUse = 0;
  #closed = false;

  constructor(
    private readonly store: string,
    private readonly endpoint: Endpoint,
    private readonly options: ExternalEngineOptions,
  ) {
    this.#pool = mysql.createPool({
      ...connectionConfig(endpoint, options),
      connectionLimit: POOL_SIZE,
      // The pool closes a free connection past maxIdle within a second and the last one after idleTimeout.
      maxIdle: 1,
      idleTimeout: options.idleMs ?? 300_000,
    });
    this.#pool.on('connection', (connection) => connection.on('error', () => undefined));
  }

  async query(request: QueryRequest): Promise<RowSet> {
    const params = positionalParams('mysql', request.params);
    return this.#run(request.timeoutMs, 'query', async (connection) => {
      await this.#prepareSession(connection, request.timeoutMs, true);
      await run(connection, 'START TRANSACTION READ ONLY');
      await refuseWithoutRows(connection, request.sql);
      const result = await readRows(connection, request.sql, params, request.maxRows, false);
      if (!result.closed) await run(connection, 'ROLLBACK');
      return { value: rowSet(result), closed: result.closed };
    });
  }

  async execute(request: ExecuteRequest): Promise<StatementResult[]> {
    const statements = request.statements.map((statement) => ({
      sql: statement.sql,
      params: positionalParams('mysql', statement.params),
    }));
    return this.#run(request.timeoutMs, 'execute', async (connection, expired) => {
      await this.#prepareSession(connection, request.timeoutMs, false);
      if (request.transaction) await run(connection, 'START TRANSACTION');
      const results: StatementResult[] = [];
      for (const [index, statement] of statements.entries()) {
        if (expired()) throw timeoutError('mysql', request.timeoutMs);
        let result: StatementRows;
        try {
          result = await readRows(connection, statement.sql, statement.params, request.maxRows, true);
        } catch (err) {
          throw Object.assign(err as object, { statement: index });
        }
        results.push({
          rows_affected: result.header ? result.header.affectedRows : result.rowCount,
          last_insert_id: insertId(result.header),
          ...(result.header ? {} : { result: rowSet(result) }),
          ...(result.header && result.warnings ? { warnings: result.warnings } : {}),
        });
      }
      if (expired()) throw timeoutError('mysql', request.timeoutMs);
      if (request.transaction) await run(connection, 'COMMIT');
      return { value: results, closed: false };
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await new Promise<void>((resolve) => this.#pool.end(() => resolve()));
  }

  /**
   * Sets the session up for one call: its statement time limit (the backstop should the
   * client timer's KILL QUERY fail) and whether the session is read-only. `/query` needs the
   * session read-only, not only its transaction: DDL commits the transaction implicitly and
   * would then run outside it, in a read-write one. Every call sets both, so a pooled
   * connection carries nothing over from the call before.
   */
  async #prepareSession(connection: PoolConnection, timeoutMs: number, readOnly: boolean): Promise<void> {
    if (this.#mariadb === undefined) {
      const [[version]] = (await run(connection, 'SELECT VERSION()')) as [[string]];
      this.#mariadb = /mariadb/i.test(version);
    }
    const serverMs = timeoutMs + SERVER_TIMEOUT_GRACE_MS;
    const flag = readOnly ? 1 : 0;
    await run(
      connection,
      this.#mariadb
        ? `SET SESSION max_statement_time = ${serverMs / 1000}, SESSION tx_read_only = ${flag}`
        : `SET SESSION max_execution_time = ${serverMs}, SESSION transaction_read_only = ${flag}`,
    );
  }

  /**
   * Runs `work` on a pool connection against the deadline. A failed statement leaves the
   * transaction to a ROLLBACK; a connection that cannot roll back, that outlived its deadline
   * or that `work` closed is not returned to the pool.
   */
  #run<T>(
    timeoutMs: number,
    op: 'query' | 'execute',
    work: (connection: PoolConnection, expired: () => boolean) => Promise<{ value: T; closed: boolean }>,
  ): Promise<T> {
    let connection: PoolConnection | undefined;
    return withDeadline(
      timeoutMs,
      async (expired) => {
        let held: PoolConnection;
        try {
          held = await new Promise<PoolConnection>((resolve, reject) =>
            this.#pool.getConnection((err, got) => (err ? reject(err) : resolve(got))),
          );
        } catch (err) {
          throw storeUnavailable('mysql', this.store, this.endpoint, err);
        }
        this.#inUse += 1;
        /** Back to the pool, or closed (`closed`: `work` closed it already). */
        const release = (destroy: boolean, closed = false) => {
          this.#inUse -= 1;
          if (closed) return;
          if (destroy) held.destroy();
          else held.release();
        };
        if (expired()) {
          release(false);
          throw timeoutError('mysql', timeoutMs);
        }
        connection = held;
        try {
          const { value, closed } = await work(held, expired);
          release(expired(), closed);
          return value;
        } catch (err) {
          const rolledBack = await run(held, 'ROLLBACK').then(
            () => true,
            () => false,
          );
          release(!rolledBack || expired());
          throw this.#error(err, op, timeoutMs);
        }
      },
      () => {
        if (connection) void this.#kill(connection.threadId);
      },
      () =>
        connection
          ? timeoutError('mysql', timeoutMs)
          : noConnection('mysql', this.store, this.endpoint, this.#inUse, timeoutMs),
    );
  }

  /** Stops the statement running on `threadId`, from a connection of its own. */
  async #kill(threadId: number): Promise<void> {
    const side = mysql.createConnection({ ...connectionConfig(this.endpoint, this.options), connectTimeout: 5_000 });
    side.on('error', () => undefined);
    try {
      await run(side, `KILL QUERY ${Number(threadId)}`);
    } catch {
      // The session's statement time limit stops the statement anyway, a moment later.
    } finally {
      side.destroy();
    }
  }

  #error(err: unknown, op: 'query' | 'execute', timeoutMs: number): ServiceError {
    if (err instanceof ServiceError) return err;
    const failure = err as Partial<QueryError> & { sqlMessage?: string; statement?: number };
    if (typeof failure.errno !== 'number' || failure.fatal) {
      return storeUnavailable('mysql', this.store, this.endpoint, err);
    }
    if (TIMED_OUT.has(failure.errno)) return timeoutError('mysql', timeoutMs);
    if (failure.errno === ER_READ_ONLY_TRANSACTION && op === 'query') return readOnlyError(failure.errno);
    if (UNAVAILABLE.has(failure.errno)) return storeUnavailable('mysql', this.store, this.endpoint, err);
    return engineError(failure.sqlMessage ?? failure.message ?? 'statement failed', {
      engine_code: failure.errno,
      ...(failure.sqlState ? { sqlstate: failure.sqlState } : {}),
      ...(failure.statement === undefined ? {} : { statement: failure.statement }),
    });
  }
}

/**
 * `/query` takes only statements that return rows, as the server describes the prepared
 * statement (it is cached, so running it prepares nothing again). The read-only session and
 * transaction are not enough alone: a procedure can `SET SESSION tx_read_only = 0; COMMIT`
 * and then write, so `CALL` must not run here, nor `SET`, `DO` or `SELECT ... INTO`, which
 * describe no columns either.
 */
async function refuseWithoutRows(connection: PoolConnection, sql: string): Promise<void> {
  const columns = await new Promise<number>((resolve, reject) =>
    // mysql2's typings leave out the columns its PreparedStatementInfo carries.
    connection.prepare(sql, (err, statement) => (err ? reject(err) : resolve((statement as unknown as { columns: unknown[] }).columns.length))),
  );
  if (columns === 0) {
    throw new ServiceError('READ_ONLY', 'query: the statement returns no rows', { hint: { action: 'store_execute' } });
  }
}

/** Runs a statement of ours (no parameters) and resolves with its rows or header. */
function run(connection: mysql.Connection | PoolConnection, sql: string): Promise<unknown> {
  return new Promise((resolve, reject) =>
    connection.query({ sql, rowsAsArray: true }, (err, result) => (err ? reject(err) : resolve(result))),
  );
}

/**
 * Runs one client statement, prepared, and reads max_rows + 1 rows as they stream in.
 * `drain` (execute): the rest is read and counted, so the statement completes; otherwise
 * (query) the connection is closed at once, which stops the server sending (the read-only
 * transaction goes with it). In `/execute`, a statement the server cannot prepare runs as text
 * when it has no parameters.
 */
async function readRows(
  connection: PoolConnection,
  sql: string,
  params: unknown[],
  maxRows: number,
  drain: boolean,
): Promise<StatementRows> {
  let result: StatementRows;
  try {
    result = await streamRows(connection, sql, params, maxRows, drain, true);
  } catch (err) {
    if (!drain || (err as QueryError).errno !== ER_UNSUPPORTED_PS || params.length > 0) throw err;
    result = await streamRows(connection, sql, params, maxRows, drain, false);
  }
  if (!result.closed && result.warningCount > 0) {
    const warnings = await readWarnings(connection);
    if (warnings.length > 0) result.warnings = warnings;
  }
  return result;
}

/** The server's warnings about the statement before, at most MAX_WARNINGS of them. */
async function readWarnings(connection: PoolConnection): Promise<EngineWarning[]> {
  const rows = (await run(connection, `SHOW WARNINGS LIMIT ${MAX_WARNINGS}`)) as [string, number | string, string][];
  return rows.map(([level, code, message]) => ({ level: String(level).toLowerCase(), code: Number(code), message: String(message) }));
}

const MAX_WARNINGS = 16;

function streamRows(
  connection: PoolConnection,
  sql: string,
  params: unknown[],
  maxRows: number,
  drain: boolean,
  prepared: boolean,
): Promise<StatementRows> {
  return new Promise((resolve, reject) => {
    const out: StatementRows = { fields: [], rows: [], truncated: false, rowCount: 0, header: undefined, closed: false, warningCount: 0 };
    const options = { sql, values: params, rowsAsArray: true };
    const command = prepared ? connection.execute(options) : connection.query(options);
    countWarnings(command as unknown as CommandSteps, out);
    let bytes = 0;
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve(out);
    };
    command.on('fields', (fields: FieldPacket[]) => {
      out.fields = fields;
    });
    command.on('result', (row: unknown) => {
      if (!Array.isArray(row)) {
        out.header = row as ResultSetHeader;
        out.warningCount = out.header.warningStatus;
        return;
      }
      out.rowCount += 1;
      // The rows kept are a prefix: none after the first that did not fit, by count or by bytes.
      if (!out.truncated && out.rows.length < maxRows) {
        bytes += rowJsonBytes(row);
        if (bytes <= MAX_RESULT_BYTES) {
          out.rows.push(row);
          return;
        }
      }
      out.truncated = true;
      if (!drain && !out.closed) {
        out.closed = true;
        connection.destroy();
        settle();
      }
    });
    command.on('error', (err: unknown) => settle(err));
    command.on('end', () => settle());
  });
}

/** The packet steps of a mysql2 command: the connection hands it each packet through `execute`. */
interface CommandSteps {
  execute(packet: { isEOF(): boolean; eofWarningCount(): number } | null, connection: unknown): boolean;
}

/**
 * Reads the warning count of the EOF packet that ends a statement's rows (mysql2 gives it to no
 * listener; the OK header of a statement without rows carries its own, `warningStatus`).
 */
function countWarnings(command: CommandSteps, out: StatementRows): void {
  const step = command.execute;
  command.execute = function (packet, connection) {
    if (packet?.isEOF()) out.warningCount = packet.eofWarningCount();
    return step.call(this, packet, connection);
  };
}

function insertId(header: ResultSetHeader | undefined): number | string | null {
  const id = header?.insertId as number | string | undefined;
  if (id === undefined || id === 0 || id === '0') return null;
  return typeof id === 'string' && Number.isSafeInteger(Number(id)) ? Number(id) : id;
}

/** The SQL names of mysql2's column type codes; BLOB and string types depend on the charset. */
const TYPE_NAMES: Record<number, string> = {
  0x00: 'decimal', 0x01: 'tinyint', 0x02: 'smallint', 0x03: 'int', 0x04: 'float', 0x05: 'double',
  0x06: 'null', 0x07: 'timestamp', 0x08: 'bigint', 0x09: 'mediumint', 0x0a: 'date', 0x0b: 'time',
  0x0c: 'datetime', 0x0d: 'year', 0x0e: 'date', 0x0f: 'varchar', 0x10: 'bit', 0xf2: 'vector',
  0xf5: 'json', 0xf6: 'decimal', 0xf7: 'enum', 0xf8: 'set', 0xff: 'geometry',
};
const BLOB_TYPES = new Set([0xf9, 0xfa, 0xfb, 0xfc]);
const BINARY_CHARSET = 63;

function columnType(field: FieldPacket): string {
  const code = field.columnType ?? field.type ?? -1;
  const binary = field.characterSet === BINARY_CHARSET;
  if (field.extendedFormat === 'json') return 'json';
  if (BLOB_TYPES.has(code)) return binary ? 'blob' : 'text';
  if (code === 0xfd) return binary ? 'varbinary' : 'varchar';
  if (code === 0xfe) return binary ? 'binary' : 'char';
  return TYPE_NAMES[code] ?? `type_${code}`;
}

/** `2024-01-02 03:04:05` -> `2024-01-02T03:04:05`: ISO 8601, the server's wall-clock time. */
const isoDateTime = (value: unknown) => (typeof value === 'string' ? value.replace(' ', 'T') : value);

function rowSet(result: StatementRows): RowSet {
  const types = result.fields.map(columnType);
  return {
    columns: result.fields.map((field) => field.name),
    column_types: types,
    rows: result.rows.map((row) =>
      row.map((value, index) => {
        const type = types[index];
        return jsonValue(type === 'datetime' || type === 'timestamp' ? isoDateTime(value) : value);
      }),
    ),
    truncated: result.truncated,
    ...(result.warnings ? { warnings: result.warnings } : {}),
  };
}
