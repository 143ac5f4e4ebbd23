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
    const { deploymentId, networkName } = await ensureDeployment(db);
    return {
      db,
      statements: new Statements(sqlite),
      deploymentId,
      networkName,
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

/** The deployment id and network name of the data directory, made at its first open. */
async function ensureDeployment(db: Kysely<Database>): Promise<{ deploymentId: string; networkName: string }> {
  const read = async (key: string) => (await db.selectFrom('meta').select('value').where('key', '=', key).executeTakeFirst())?.value;
  let deploymentId = await read('deployment_id');
  if (deploymentId === undefined) {
    deploymentId = randomUUID().replaceAll('-', '').slice(0, 12);
    await db.insertInto('meta').values({ key: 'deployment_id', value: deploymentId }).execute();
  }
  let networkName = await read('network_name');
  if (networkName === undefined) {
    networkName = deploymentNetworkName(deploymentId);
    await db.insertInto('meta').values({ key: 'network_name', value: networkName }).execute();
  }
  return { deploymentId, networkName };
}

/** A deployment's own network name: 12 characters at most, as `[network].name` (bridge interfaces are 15). */
export const deploymentNetworkName = (deploymentId: string): string => `sd${deploymentId.replaceAll('-', '').slice(0, 10)}`;
