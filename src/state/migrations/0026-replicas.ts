import type { Kysely, Migration } from 'kysely';

/**
 * Migration 0026_replicas: never edit it once shipped; add a new migration.
 *
 * The servers that share the database (replicas), each with its heartbeat: a row is made at a
 * server's start and removed at its stop; a replica whose heartbeat is older than 20 s is gone.
 */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('replicas')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('host', 'text', (c) => c.notNull())
      .addColumn('data_dir', 'text', (c) => c.notNull())
      .addColumn('pid', 'integer', (c) => c.notNull())
      .addColumn('url', 'text')
      .addColumn('started_at', 'integer', (c) => c.notNull())
      .addColumn('heartbeat_at', 'integer', (c) => c.notNull())
      .execute();
  },
};
