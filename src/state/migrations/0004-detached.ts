import { type Kysely, type Migration } from 'kysely';

/** Migration 0004_detached: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The service's id of a detached command -> the id its sandbox's agent gave it.
    await db.schema
      .createTable('detached_commands')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
      .addColumn('process_id', 'text', (c) => c.notNull())
      .addColumn('pid', 'integer', (c) => c.notNull())
      .addColumn('command', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('detached_commands_sandbox').on('detached_commands').column('sandbox_uuid').execute();
  },
};
