import { type Kysely, type Migration } from 'kysely';

/** Migration 0007_status_reason: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Why a sandbox is in its status (a lost one: which container went, and when it was noticed).
    await db.schema.alterTable('sandboxes').addColumn('status_reason', 'text').execute();
  },
};
