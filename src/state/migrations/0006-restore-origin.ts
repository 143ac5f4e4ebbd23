import { type Kysely, type Migration } from 'kysely';

/** Migration 0006_restore_origin: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // A snapshot keeps its sandbox's labels and description, which a restore gives back, and a
    // restored sandbox names the snapshot it came from.
    await db.schema.alterTable('snapshots').addColumn('labels', 'text', (c) => c.notNull().defaultTo('{}')).execute();
    await db.schema.alterTable('snapshots').addColumn('description', 'text').execute();
    await db.schema.alterTable('sandboxes').addColumn('restored_from', 'text').execute();
  },
};
