/**
 * The `postgres` store kind: a PostgreSQL server reached with `pg`, a pool of at most four
 * connections per store. `/query` runs in `BEGIN READ ONLY`, so the server, not a parser,
 * refuses writes (`INSERT`, `nextval()`); every statement goes through the extended protocol
 * (pg-cursor), which takes one statement only, so a `;`-stacked second one is refused too.
 * Rows are read through a cursor and the read stops at max_rows + 1, or once their JSON would
 * pass MAX_RESULT_BYTES.
 *
 * Timeouts: a client timer answers TIMEOUT at `timeout_ms` whatever the server does and
 * cancels the statement with `pg_cancel_backend` from a side connection; `SET LOCAL
 * statement_timeout` (a little longer) makes the server cancel it itself should that fail.
 */
import pg from 'pg';
import Cursor from 'pg-cursor';
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
  type ExecuteRequest,
  type QueryRequest,
  type RowSet,
  type StatementResult,
  type StoreHandle,
} from '../../store-engine.js';

/** What a postgres store's config holds (see external-config.ts). */
export const POSTGRES_SPEC: ExternalSpec = {
  kind: 'postgres',
  schemes: { 'postgres:': false, 'postgresql:': false },
  defaultPort: 5432,
  defaultUser: 'postgres',
  tlsField: 'ssl',
  extraFields: { database: (value, name) => checkText(value, name, 63) },
};

export class PostgresEngine extends ExternalSqlEngine {
  readonly kind = 'postgres' as const;

  constructor(options: ExternalEngineOptions = {}) {
    super(POSTGRES_SPEC, options);
  }

  protected handleFor(name: string, endpoint: Endpoint): StoreHandle {
    return new PostgresHandle(name, endpoint, this.options);
  }

  protected async ping(endpoint: Endpoint): Promise<void> {
    const client = new pg.Client(clientConfig(endpoint, this.options));
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

function clientConfig(endpoint: Endpoint, options: ExternalEngineOptions): pg.ClientConfig {
  const { host, tls } = connectTarget(endpoint);
  return {
    host,
    port: endpoint.port,
    user: endpoint.user,
    password: endpoint.password,
    database: endpoint.database,
    ssl: tls ?? false,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    // Timestamps with a time zone come back in UTC, so their ISO form does not depend on the server's zone.
    options: '-c TimeZone=UTC',
    application_name: 'sandboxd',
  };
}

const serverTimeout = (timeoutMs: number) => timeoutMs + SERVER_TIMEOUT_GRACE_MS;

/** The SQLSTATEs that mean the server cannot serve us (not that the statement is wrong). */
const UNAVAILABLE = /^(08000|08001|08003|08004|08006|28000|28P01|3D000|53300|57P0[1-3])$/;
const QUERY_CANCELED = '57014';
const READ_ONLY_TRANSACTION = '25006';

interface DatabaseError extends Error {
  code: string;
  position?: string;
}

const isDatabaseError = (err: unknown): err is DatabaseError =>
  err instanceof Error && typeof (err as { code?: unknown }).code === 'string' && /^[0-9A-Z]{5}$/.test((err as DatabaseError).code);

/** Rows of one statement, read through a cursor. */
interface CursorResult {
  fields: { name: string; dataTypeID: number }[];
  rows: unknown[][];
  truncated: boolean;
  rowCount: number;
}

class PostgresHandle implements StoreHandle {
  readonly #pool: pg.Pool;
  readonly #typeNames = new Map<number, string>(BUILTIN_TYPE_NAMES);
  /** Pool clients held by calls now (all of them: a waiting call that times out is BUSY). */
  #inUse = 0;
  #closed = false;

  constructor(
    private readonly store: string,
    private readonly endpoint: Endpoint,
    private readonly options: ExternalEngineOptions,
  ) {
    this.#pool = new pg.Pool({ ...clientConfig(endpoint, options), max: POOL_SIZE, idleTimeoutMillis: options.idleMs ?? 300_000 });
    // An idle connection the server closed: the pool drops it; the next call connects anew.
    this.#pool.on('error', () => undefined);
  }

  async query(request: QueryRequest): Promise<RowSet> {
    const params = positionalParams('postgres', request.params);
    return this.#run(request.timeoutMs, 'query', async (client) => {
      await client.query('BEGIN READ ONLY');
      await client.query(`SET LOCAL statement_timeout = ${serverTimeout(request.timeoutMs)}`);
      const result = await readCursor(client, request.sql, params, request.maxRows, false);
      const rowSet = await this.#rowSet(client, result);
      await client.query('ROLLBACK');
      return rowSet;
    });
  }

  async execute(request: ExecuteRequest): Promise<StatementResult[]> {
    const statements = request.statements.map((statement) => ({
      sql: statement.sql,
      params: positionalParams('postgres', statement.params),
    }));
    return this.#run(request.timeoutMs, 'execute', async (client, expired) => {
      const results: StatementResult[] = [];
      if (request.transaction) {
        await client.query('BEGIN');
        await client.query(`SET LOCAL statement_timeout = ${serverTimeout(request.timeoutMs)}`);
      } else {
        // Each statement in its own implicit transaction, so VACUUM or CREATE INDEX CONCURRENTLY work.
        await client.query(`SET statement_timeout = ${serverTimeout(request.timeoutMs)}`);
      }
      for (const [index, statement] of statements.entries()) {
        if (expired()) throw timeoutError('postgres', request.timeoutMs);
        let result: CursorResult;
        try {
          result = await readCursor(client, statement.sql, statement.params, request.maxRows, true);
        } catch (err) {
          throw withStatement(err, index);
        }
        results.push({
          rows_affected: result.rowCount,
          last_insert_id: null,
          ...(result.fields.length > 0 ? { result: await this.#rowSet(client, result) } : {}),
        });
      }
      if (expired()) throw timeoutError('postgres', request.timeoutMs);
      if (request.transaction) await client.query('COMMIT');
      return results;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }

  /**
   * Runs `work` on a pool client against the deadline. A failed statement leaves the
   * transaction to a ROLLBACK; a client that cannot even roll back, or that outlived its
   * deadline, is closed instead of returned to the pool.
   */
  #run<T>(
    timeoutMs: number,
    op: 'query' | 'execute',
    work: (client: pg.PoolClient, expired: () => boolean) => Promise<T>,
  ): Promise<T> {
    let client: pg.PoolClient | undefined;
    return withDeadline(
      timeoutMs,
      async (expired) => {
        let held: pg.PoolClient;
        try {
          held = await this.#pool.connect();
        } catch (err) {
          throw storeUnavailable('postgres', this.store, this.endpoint, err);
        }
        this.#inUse += 1;
        const release = (destroy: boolean) => {
          this.#inUse -= 1;
          held.release(destroy);
        };
        if (expired()) {
          release(false);
          throw timeoutError('postgres', timeoutMs);
        }
        client = held;
        try {
          const value = await work(held, expired);
          release(expired());
          return value;
        } catch (err) {
          const rolledBack = await held.query('ROLLBACK').then(
            () => true,
            () => false,
          );
          release(!rolledBack || expired());
          throw this.#error(err, op, timeoutMs);
        }
      },
      () => {
        if (client) void this.#cancel(backendPid(client));
      },
      () =>
        client
          ? timeoutError('postgres', timeoutMs)
          : noConnection('postgres', this.store, this.endpoint, this.#inUse, timeoutMs),
    );
  }

  /** Cancels the statement running on backend `pid`, from a connection of its own. */
  async #cancel(pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    const side = new pg.Client({ ...clientConfig(this.endpoint, this.options), connectionTimeoutMillis: 5_000 });
    side.on('error', () => undefined);
    try {
      await side.connect();
      await side.query('SELECT pg_cancel_backend($1)', [pid]);
    } catch {
      // The session's statement_timeout cancels the statement anyway, a moment later.
    } finally {
      await side.end().catch(() => undefined);
    }
  }

  #error(err: unknown, op: 'query' | 'execute', timeoutMs: number): ServiceError {
    if (err instanceof ServiceError) return err;
    const statement = (err as { statement?: number }).statement;
    if (!isDatabaseError(err)) return storeUnavailable('postgres', this.store, this.endpoint, err);
    if (err.code === QUERY_CANCELED) return timeoutError('postgres', timeoutMs);
    if (err.code === READ_ONLY_TRANSACTION && op === 'query') return readOnlyError(err.code);
    if (UNAVAILABLE.test(err.code)) return storeUnavailable('postgres', this.store, this.endpoint, err);
    return engineError(err.message, {
      engine_code: err.code,
      ...(err.position === undefined ? {} : { position: Number(err.position) }),
      ...(statement === undefined ? {} : { statement }),
    });
  }

  async #rowSet(client: pg.PoolClient, result: CursorResult): Promise<RowSet> {
    return {
      columns: result.fields.map((field) => field.name),
      column_types: await this.#columnTypes(client, result.fields),
      rows: result.rows.map((row) => row.map((value) => jsonValue(value))),
      truncated: result.truncated,
    };
  }

  /** The type names of the columns, looking up (once per store) any the built-in table lacks. */
  async #columnTypes(client: pg.PoolClient, fields: CursorResult['fields']): Promise<string[]> {
    const unknown = [...new Set(fields.map((field) => field.dataTypeID))].filter((oid) => !this.#typeNames.has(oid));
    if (unknown.length > 0) {
      const found = await client.query<{ oid: number; typname: string }>(
        'SELECT oid::int AS oid, typname FROM pg_type WHERE oid = ANY($1::oid[])',
        [unknown],
      );
      for (const row of found.rows) this.#typeNames.set(row.oid, row.typname);
    }
    return fields.map((field) => this.#typeNames.get(field.dataTypeID) ?? String(field.dataTypeID));
  }
}

/** The backend process id the server gave the connection (what pg_cancel_backend takes). */
function backendPid(client: pg.PoolClient): number | undefined {
  // pg keeps it from the BackendKeyData message; its typings do not declare it.
  // pg sets processID on a connected client (the backend's pid) but its types do not declare it.
  const pid = (client as unknown as { processID?: unknown }).processID;
  return typeof pid === 'number' ? pid : undefined;
}

function withStatement(err: unknown, index: number): unknown {
  if (isDatabaseError(err)) Object.assign(err, { statement: index });
  return err;
}

/** Rows a cursor's first read asks for; later reads ask for as many as the bytes left may hold. */
const FIRST_READ = 16;
const MAX_READ = 1000;

/**
 * Runs one statement through a cursor (the extended protocol: one statement only) and reads
 * up to max_rows + 1 rows, in reads sized by the bytes left, stopping once the rows' JSON
 * would pass MAX_RESULT_BYTES. `drain` (execute): reads the rest too, counting and
 * discarding, so the statement completes and its row count is exact; a query's cursor is
 * closed instead.
 */
function readCursor(
  client: pg.PoolClient,
  sql: string,
  params: unknown[],
  maxRows: number,
  drain: boolean,
): Promise<CursorResult> {
  const cursor = client.query(new Cursor<unknown[]>(sql, params, { rowMode: 'array', types: TYPES }));
  const read = (count: number) =>
    new Promise<{ rows: unknown[][]; result: pg.QueryResult }>((resolve, reject) => {
      cursor.read(count, (err, rows, result) => (err ? reject(err) : resolve({ rows, result })));
    });
  return (async () => {
    const rows: unknown[][] = [];
    let bytes = 0;
    let rowCount = 0;
    let truncated = false;
    let want = Math.min(FIRST_READ, maxRows + 1);
    let batch = await read(want);
    for (;;) {
      rowCount += batch.rows.length;
      for (const row of batch.rows) {
        if (rows.length === maxRows) {
          truncated = true;
          break;
        }
        bytes += rowJsonBytes(row);
        if (bytes > MAX_RESULT_BYTES) {
          truncated = true;
          break;
        }
        rows.push(row);
      }
      if (truncated || batch.rows.length < want) break;
      // As many rows as the bytes left may hold at the size of those read so far (one at least).
      const perRow = bytes / Math.max(rows.length, 1);
      want = Math.max(1, Math.min(MAX_READ, maxRows + 1 - rows.length, Math.floor((MAX_RESULT_BYTES - bytes) / perRow) + 1));
      batch = await read(want);
    }
    if (truncated && drain) {
      for (let more = await read(MAX_READ); more.rows.length > 0; more = await read(MAX_READ)) rowCount += more.rows.length;
    }
    await cursor.close();
    // The cursor's one result: its fields and, once the statement completed, its row count.
    const { result } = batch;
    const counted = result.rowCount;
    return {
      fields: result.fields ?? [],
      rows,
      truncated,
      rowCount: truncated || counted === null || counted === undefined ? rowCount : counted,
    };
  })();
}

const OID = pg.types.builtins;

/** Type names of the built-in types by OID, lower case as pg_type spells them. */
const BUILTIN_TYPE_NAMES: [number, string][] = Object.entries(OID).map(([name, oid]) => [oid, name.toLowerCase()]);

/** `2024-01-02 03:04:05.5+00` -> `2024-01-02T03:04:05.5+00:00` (ISO 8601); other text as is. */
function isoTimestamp(text: string): string {
  const match = /^(\d{4,}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d)?(?::?(\d\d))?$/.exec(text);
  if (!match) return text;
  const [, date, time, zone, minutes] = match;
  return `${date}T${time}${zone === undefined ? '' : `${zone}:${minutes ?? '00'}`}`;
}

const asText = (text: string) => text;

/** pg's parser of `text[]`: an array literal into (nested) arrays of strings and nulls. */
const textArray = pg.types.getTypeParser(1009 as Parameters<typeof pg.types.getTypeParser>[0], 'text') as (text: string) => unknown;
const mapNested = (value: unknown, map: (text: string) => string): unknown =>
  Array.isArray(value) ? value.map((inner) => mapNested(inner, map)) : typeof value === 'string' ? map(value) : value;

/** The array types whose elements get the treatment of their element type (pg's own parsers are lossy for them). */
const ARRAY_OIDS = { timestamp: 1115, timestamptz: 1185, date: 1182, interval: 1187, numeric: 1231 } as const;

/**
 * Value parsers: pg's own, except that dates, times and intervals stay text (pg would make
 * local-time Date objects), timestamps become ISO text with their full precision, and int8 /
 * numeric stay text (exact beyond 2^53), in arrays too. bytea arrives as a Buffer and json as
 * parsed JSON.
 */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    switch (oid) {
      case OID.TIMESTAMP:
      case OID.TIMESTAMPTZ:
        return isoTimestamp;
      case OID.DATE:
      case OID.TIME:
      case OID.TIMETZ:
      case OID.INTERVAL:
      case OID.INT8:
      case OID.NUMERIC:
      case OID.MONEY:
        return asText;
      case ARRAY_OIDS.timestamp:
      case ARRAY_OIDS.timestamptz:
        return (text: string) => mapNested(textArray(text), isoTimestamp);
      case ARRAY_OIDS.date:
      case ARRAY_OIDS.interval:
      case ARRAY_OIDS.numeric:
        return textArray;
      default:
        return pg.types.getTypeParser(oid, format ?? 'text');
    }
  }) as pg.CustomTypesConfig['getTypeParser'],
};
