import Sqlite from 'better-sqlite3';
import type { Kysely, Migration } from 'kysely';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { DataDirLock, databaseFile } from './data-dir-lock.js';
import { applyMigrations } from './migration-state.js';
import { MIGRATIONS } from './migrations/index.js';
import type { Database } from './schema.js';
import { connectedPool, postgresKysely, PostgresSql, redactedUrl } from './postgres.js';
import { gatedSqlite, type Sql } from './sql.js';

/** The opened state store of one data directory. */
export interface Store {
  db: Kysely<Database>;
  /**
   * Statements for the hot paths (prepared once) and transactions of several statements, on the
   * same database as `db` (on SQLite behind one gate with it: nothing interleaves a transaction).
   */
  sql: Sql;
  /**
   * The deployment id: made once, at the first open of the data directory, and kept in it
   * (replicas of one deployment share it). Every engine object the server makes carries it
   * (the `sandboxd.instance` label, and the names of snapshot and built images), and the
   * server lists only the objects that do.
   */
  deploymentId: string;
  /**
   * The deployment's network name (`sd` and the id's first ten digits; `sandboxd` for a data
   * directory made before deployment ids): its Docker networks and packet-filter chains are
   * named from it unless `--network-name` says otherwise.
   */
  networkName: string;
  dataDir: string;
  /** Where the state is: the data directory's SQLite file, or the PostgreSQL URL without its password. */
  location: string;
  /** The PostgreSQL database's URL (for a connection of its own, as the leader's lock needs); none on SQLite. */
  databaseUrl?: string;
  /** The migrations this open applied, in order (none when the database was up to date). */
  migrated: string[];
  close(): Promise<void>;
}

/** Opens a data directory's SQLite database in WAL mode, without its lock or migrations. */
function openDatabase(dataDir: string): { db: Kysely<Database>; sql: Sql } {
  const sqlite = new Sqlite(databaseFile(dataDir));
  try {
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
  } catch (err) {
    sqlite.close();
    throw err;
  }
  return gatedSqlite<Database>(sqlite);
}

/** Opens a PostgreSQL database once it answers. */
async function openPostgres(url: string): Promise<{ db: Kysely<Database>; sql: Sql }> {
  const pool = await connectedPool(url);
  return { db: postgresKysely<Database>(pool), sql: new PostgresSql(pool) };
}

/** Where the state of a data directory lives: its own SQLite file, or a PostgreSQL database. */
export interface StoreOptions {
  /** `postgres://...`: every table in that database (replicas of one deployment share it). */
  databaseUrl?: string | undefined;
}

/**
 * Opens the data directory: takes its lock, opens the database (SQLite in WAL mode in the
 * directory, or the PostgreSQL database of `databaseUrl`) and applies pending migrations (the
 * core ones by default; the server passes every domain's too, `allMigrations()`). A second
 * process on the same directory gets DataDirLockedError (on PostgreSQL the directory is one
 * replica's own: its TLS files and agent sockets); a database a newer sandboxd migrated,
 * DatabaseNewerError (and is left as it is).
 */
export async function openStore(dataDir: string, migrations: Record<string, Migration> = MIGRATIONS, options: StoreOptions = {}): Promise<Store> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lock = DataDirLock.acquire(dataDir);
  let opened: { db: Kysely<Database>; sql: Sql } | undefined;
  try {
    const location = options.databaseUrl ? redactedUrl(options.databaseUrl) : databaseFile(dataDir);
    opened = options.databaseUrl ? await openPostgres(options.databaseUrl) : openDatabase(dataDir);
    const { db, sql } = opened;
    const migrated = await applyMigrations(db, migrations, location);
    const { deploymentId, networkName } = await ensureDeployment(db);
    return {
      db,
      sql,
      deploymentId,
      networkName,
      dataDir,
      location,
      ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
      migrated,
      async close() {
        await db.destroy();
        lock.release();
      },
    };
  } catch (err) {
    await opened?.db.destroy();
    lock.release();
    throw err;
  }
}

/**
 * The deployment id and network name of the database, made at its first open. Replicas that
 * open a new database at once each offer their own; the first insert wins and all read it back.
 */
async function ensureDeployment(db: Kysely<Database>): Promise<{ deploymentId: string; networkName: string }> {
  const kept = async (key: string, offered: string): Promise<string> => {
    await db.insertInto('meta').values({ key, value: offered }).onConflict((conflict) => conflict.column('key').doNothing()).execute();
    return (await db.selectFrom('meta').select('value').where('key', '=', key).executeTakeFirstOrThrow()).value;
  };
  const deploymentId = await kept('deployment_id', randomUUID().replaceAll('-', '').slice(0, 12));
  const networkName = await kept('network_name', deploymentNetworkName(deploymentId));
  return { deploymentId, networkName };
}

/** A deployment's own network name: 12 characters at most, as `[network].name` (bridge interfaces are 15). */
export const deploymentNetworkName = (deploymentId: string): string => `sd${deploymentId.replaceAll('-', '').slice(0, 10)}`;
