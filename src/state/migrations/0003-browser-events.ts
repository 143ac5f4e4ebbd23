import { type Kysely, type Migration } from 'kysely';

/** Migration 0003_browser_events: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Keyed by uuid so a sandbox made again under the same name starts a fresh log; seq starts at 0.
    await db.schema
      .createTable('browser_events')
      .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
      .addColumn('seq', 'integer', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('page', 'text', (c) => c.notNull())
      .addColumn('ts', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('browser_events_pk', ['sandbox_uuid', 'seq'])
      .execute();
  },
};
