import { type Kysely, type Migration } from 'kysely';

/** Migration 0021_object_idempotency_request (the objects domain's): never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The hash of the method and arguments a result was kept for: a key sent again with another
    // call is a 422, not a replay of that result.
    await db.schema.alterTable('object_idempotency').addColumn('request_hash', 'text').execute();
  },
};
