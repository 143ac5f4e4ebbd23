import { sql, SqliteAdapter, type Kysely, type Migration } from 'kysely';

/**
 * Migration 0025_object_uid (the objects domain's): never edit it once shipped; add a new
 * migration.
 *
 * The number a bound object's processes run as (uid `200000 + n`), a column of its own where it
 * was SQLite's `rowid`, which PostgreSQL has not: existing objects keep the number they ran as.
 * A new object takes the highest number plus one (as a rowid), unique.
 */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('objects').addColumn('uid_number', 'integer').execute();
    // A new PostgreSQL database has no objects to number.
    if (db.getExecutor().adapter instanceof SqliteAdapter) await sql`UPDATE objects SET uid_number = rowid`.execute(db);
    await db.schema.createIndex('objects_uid_number').on('objects').column('uid_number').unique().execute();
  },
};
