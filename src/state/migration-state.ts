import Sqlite from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, sql, type Migration } from 'kysely';
import { existsSync } from 'node:fs';
import { databaseFile } from './data-dir-lock.js';
import { connectedPool, postgresKysely, redactedUrl } from './postgres.js';

/** The database was migrated by a newer sandboxd: this one does not know all its migrations. */
export class DatabaseNewerError extends Error {
  constructor(readonly location: string, readonly unknown: string[]) {
    super(
      `the database ${location} was migrated by a newer sandboxd (migration${unknown.length > 1 ? 's' : ''} ` +
        `${unknown.join(', ')} unknown to this version): run the newer sandboxd, or restore a backup made by this version`,
    );
    this.name = 'DatabaseNewerError';
  }
}

/** Where a database stands against the migrations of this version. */
export interface MigrationState {
  /** The migrations the database has recorded, in name order. */
  applied: string[];
  /** This version's migrations the database has yet to apply, in name order. */
  pending: string[];
  /** Recorded migrations this version does not have: a newer sandboxd's. */
  unknown: string[];
}

/** Reads which migrations a database has recorded (Kysely's `kysely_migration`; none in a new database). */
export async function migrationState(db: Kysely<any>, migrations: Record<string, Migration>): Promise<MigrationState> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  const applied = tables.some((table) => table.name === 'kysely_migration')
    ? (await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(db)).rows.map((row) => row.name)
    : [];
  const known = new Set(applied);
  return {
    applied,
    pending: Object.keys(migrations).filter((name) => !known.has(name)).sort(),
    unknown: applied.filter((name) => !(name in migrations)),
  };
}

/**
 * Applies the pending migrations in name order, each in a transaction, and returns their names.
 * A database that a newer sandboxd migrated is refused first (DatabaseNewerError), never changed.
 */
export async function applyMigrations(db: Kysely<any>, migrations: Record<string, Migration>, location: string): Promise<string[]> {
  const { unknown } = await migrationState(db, migrations);
  if (unknown.length > 0) throw new DatabaseNewerError(location, unknown);
  const { error, results = [] } = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateToLatest();
  if (error) throw error;
  return results.filter((result) => result.status === 'Success').map((result) => result.migrationName);
}

/** Reads the migration state of a database file without a lock or a change; a newer sandboxd's database is refused (DatabaseNewerError). */
export async function readMigrationState(file: string, migrations: Record<string, Migration>): Promise<MigrationState> {
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new Sqlite(file, { readonly: true, fileMustExist: true }) }) });
  try {
    const state = await migrationState(db, migrations);
    if (state.unknown.length > 0) throw new DatabaseNewerError(file, state.unknown);
    return state;
  } finally {
    await db.destroy();
  }
}

/**
 * What `sandboxd migrate --dry-run` prints: the applied and pending migrations of a data
 * directory's database, or of the PostgreSQL database of `databaseUrl`.
 */
export async function migrationReport(dataDir: string, migrations: Record<string, Migration>, databaseUrl?: string): Promise<string> {
  if (databaseUrl) {
    const location = redactedUrl(databaseUrl);
    const db = postgresKysely(await connectedPool(databaseUrl, 1));
    try {
      const { applied, pending, unknown } = await migrationState(db, migrations);
      if (unknown.length > 0) throw new DatabaseNewerError(location, unknown);
      return stateLine(location, applied, pending, migrations);
    } finally {
      await db.destroy();
    }
  }
  const file = databaseFile(dataDir);
  if (!existsSync(file)) return stateLine(file, [], [], migrations);
  const { applied, pending } = await readMigrationState(file, migrations);
  return stateLine(file, applied, pending, migrations);
}

function stateLine(location: string, applied: string[], pending: string[], migrations: Record<string, Migration>): string {
  if (applied.length === 0) return `${location}: no database yet; the first serve or migrate applies all ${Object.keys(migrations).length} migrations\n`;
  return `${location}: ${applied.length} applied` + (pending.length > 0 ? `; pending: ${pending.join(', ')}\n` : '; up to date\n');
}
