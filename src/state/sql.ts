import type Sqlite from 'better-sqlite3';
import { Kysely, SqliteDialect, type DatabaseConnection, type Driver, type TransactionSettings } from 'kysely';

/** The database engines of the state store. */
export type Engine = 'sqlite' | 'postgres';

/** PostgreSQL's code for a row that a unique constraint refuses. */
const UNIQUE_VIOLATION = '23505';

/**
 * Runs `write` again while a unique constraint refuses it (at most `attempts` times): an insert
 * that numbers its row from the rows before it (the highest plus one), which on SQLite runs alone
 * and on PostgreSQL may meet another insert that read the same number.
 */
export async function retryUniqueViolation<T>(write: () => Promise<T>, attempts = 20): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (attempt >= attempts || (err as { code?: string }).code !== UNIQUE_VIOLATION) throw err;
    }
  }
}

/** `"a" = ?, "b" = ?`: an UPDATE's SET list for these columns, in order. */
export const assignments = (columns: readonly string[]): string => columns.map((column) => `"${column}" = ?`).join(', ');

/** `?, ?, ?`: one placeholder per value. */
export const placeholders = (count: number): string => Array.from({ length: count }, () => '?').join(', ');

/** `INSERT INTO "t" ("a", "b") VALUES (?, ?)`: a row of these columns, in order. */
export const insertStatement = (table: string, columns: readonly string[]): string =>
  `INSERT INTO "${table}" (${columns.map((column) => `"${column}"`).join(', ')}) VALUES (${placeholders(columns.length)})`;

/** Values for a statement's `?` placeholders, in order. */
export type Params = readonly unknown[];

/**
 * Statements on the state store's database, the same text on both engines: `?` placeholders,
 * double-quoted identifiers, SQL that SQLite and PostgreSQL both read (a repository that needs
 * another text on one engine asks `engine`). Kysely serves the other queries; these are for the
 * hot paths (prepared once) and for transactions of several statements.
 */
export interface Sql {
  readonly engine: Engine;
  /** Every row of a query. */
  all<R>(text: string, params?: Params): Promise<R[]>;
  /** The first row of a query, if any. */
  first<R>(text: string, params?: Params): Promise<R | undefined>;
  /** Runs a statement; resolves with how many rows it changed. */
  run(text: string, params?: Params): Promise<number>;
  /** The columns of a table, in order. */
  columns(table: string): Promise<string[]>;
  /**
   * Runs `work` in one transaction: it commits when `work` resolves and rolls back when it
   * rejects. `work` must use the handle it is given (and no Kysely query) for its statements.
   * Inside a transaction, a transaction is part of the outer one.
   */
  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T>;
}

/**
 * One at a time on SQLite's one connection: Kysely's queries and transactions, and {@link Sql}'s
 * statements and transactions. A statement alone runs at once when nothing holds the gate (it
 * runs whole, synchronously); a transaction holds the gate across its awaits, so that nothing of
 * another request runs inside it (and commits or rolls back with it).
 */
export class Gate {
  private held = false;
  private readonly waiting: (() => void)[] = [];

  get free(): boolean {
    return !this.held;
  }

  async enter(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Hands the gate to the next in line, or frees it. */
  leave(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

/** {@link Sql} on SQLite (better-sqlite3): prepared statements, cached by text, behind the {@link Gate}. */
export class SqliteSql implements Sql {
  readonly engine = 'sqlite';
  private readonly cache: Map<string, Sqlite.Statement>;

  constructor(
    private readonly sqlite: Sqlite.Database,
    private readonly gate: Gate,
    /** Set on the handle a transaction's work gets: it holds the gate already. */
    private readonly inTransaction = false,
    cache?: Map<string, Sqlite.Statement>,
  ) {
    this.cache = cache ?? new Map();
  }

  /** The prepared statement of `text`. */
  statement(text: string): Sqlite.Statement {
    let statement = this.cache.get(text);
    if (!statement) {
      statement = this.sqlite.prepare(text);
      this.cache.set(text, statement);
    }
    return statement;
  }

  all<R>(text: string, params: Params = []): Promise<R[]> {
    return this.gated(() => this.statement(text).all(...params) as R[]);
  }

  first<R>(text: string, params: Params = []): Promise<R | undefined> {
    return this.gated(() => this.statement(text).get(...params) as R | undefined);
  }

  run(text: string, params: Params = []): Promise<number> {
    return this.gated(() => this.statement(text).run(...params).changes);
  }

  async columns(table: string): Promise<string[]> {
    return (await this.all<{ name: string }>('SELECT name FROM pragma_table_info(?) ORDER BY cid', [table])).map((column) => column.name);
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    if (this.inTransaction) return work(this);
    await this.gate.enter();
    try {
      this.sqlite.exec('BEGIN IMMEDIATE');
      try {
        const result = await work(new SqliteSql(this.sqlite, this.gate, true, this.cache));
        this.sqlite.exec('COMMIT');
        return result;
      } catch (err) {
        if (this.sqlite.inTransaction) this.sqlite.exec('ROLLBACK');
        throw err;
      }
    } finally {
      this.gate.leave();
    }
  }

  /** Runs a statement now when the gate is free (it runs whole: nothing interleaves), else when its turn comes. */
  private async gated<T>(statement: () => T): Promise<T> {
    if (this.inTransaction || this.gate.free) return statement();
    await this.gate.enter();
    try {
      return statement();
    } finally {
      this.gate.leave();
    }
  }
}

/** Kysely's SQLite dialect with its connection behind the {@link Gate} of the store's {@link SqliteSql}. */
export class GatedSqliteDialect extends SqliteDialect {
  constructor(
    database: Sqlite.Database,
    private readonly gate: Gate,
  ) {
    super({ database });
  }

  override createDriver(): Driver {
    return new GatedDriver(super.createDriver(), this.gate);
  }
}

/** A driver that holds the gate from a connection's acquisition to its release (a query, or a whole transaction). */
class GatedDriver implements Driver {
  constructor(
    private readonly inner: Driver,
    private readonly gate: Gate,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.gate.enter();
    try {
      return await this.inner.acquireConnection();
    } catch (err) {
      this.gate.leave();
      throw err;
    }
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.inner.beginTransaction(connection, settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(connection);
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction(connection);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    try {
      await this.inner.releaseConnection(connection);
    } finally {
      this.gate.leave();
    }
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}

/** Kysely and {@link Sql} on one SQLite connection, behind one {@link Gate}. */
export function gatedSqlite<T>(sqlite: Sqlite.Database): { db: Kysely<T>; sql: SqliteSql } {
  const gate = new Gate();
  return { db: new Kysely<T>({ dialect: new GatedSqliteDialect(sqlite, gate) }), sql: new SqliteSql(sqlite, gate) };
}
