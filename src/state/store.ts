import Sqlite from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, type Migration, type MigrationProvider } from 'kysely';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DataDirLock } from './data-dir-lock.js';
import { MIGRATIONS } from './migrations/index.js';
import type { Database } from './schema.js';

/**
 * Prepared statements on the connection Kysely uses, for the few queries every exec and file
 * operation makes (select by name, touch, audit): building and preparing them through Kysely
 * cost ~45 us each, a prepared statement ~5-25 us. better-sqlite3 is synchronous, so each
 * statement runs whole between two awaits; Kysely's connection lock is not taken, so they must
 * not run inside a Kysely transaction (there is none).
 */
export class Statements {
  private readonly cache = new Map<string, Sqlite.Statement>();

  constructor(private readonly sqlite: Sqlite.Database) {}

  /** The statement for this SQL, prepared once. */
  get(sql: string): Sqlite.Statement {
    let statement = this.cache.get(sql);
    if (!statement) {
      statement = this.sqlite.prepare(sql);
      this.cache.set(sql, statement);
    }
    return statement;
  }

  /**
   * Runs `work` (synchronous statements of this class only) in one transaction: it commits when
   * `work` returns and rolls back when it throws. Nothing else runs in between, since nothing in
   * it awaits: the way to commit several rows together on a hot path (a schedule's claim).
   */
  transaction<T>(work: () => T): T {
    return this.sqlite.transaction(work)();
  }
}

/** The opened state store of one data directory. */
export interface Store {
  db: Kysely<Database>;
  /** Prepared statements for the hot paths, on the same connection. */
  statements: Statements;
  /** Stable id of this data directory; labels every container it makes. */
  instanceId: string;
  dataDir: string;
  close(): Promise<void>;
}

/**
 * Opens the data directory: takes its lock, opens SQLite in WAL mode and applies pending
 * migrations (the core ones by default; the server passes every domain's too, `allMigrations()`). A second process on the same directory gets DataDirLockedError.
 */
export async function openStore(dataDir: string, migrations: Record<string, Migration> = MIGRATIONS): Promise<Store> {
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lock = DataDirLock.acquire(dataDir);
  try {
    const sqlite = new Sqlite(join(dataDir, 'sandboxd.db'));
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    const { error } = await new Migrator({ db, provider }).migrateToLatest();
    if (error) throw error;
    const instanceId = await ensureInstanceId(db);
    return {
      db,
      statements: new Statements(sqlite),
      instanceId,
      dataDir,
      async close() {
        await db.destroy();
        lock.release();
      },
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function ensureInstanceId(db: Kysely<Database>): Promise<string> {
  const row = await db.selectFrom('meta').select('value').where('key', '=', 'instance_id').executeTakeFirst();
  if (row) return row.value;
  const id = randomUUID().slice(0, 12);
  await db.insertInto('meta').values({ key: 'instance_id', value: id }).execute();
  return id;
}
