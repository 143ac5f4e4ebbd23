import type { Kysely, Migration } from 'kysely';

/**
 * The objects domain's migrations (DomainModule.migrations). Never edit one that has shipped;
 * add a new one.
 */
export const OBJECT_MIGRATIONS: Record<string, Migration> = {
  // The hash of the method and arguments a result was kept for: a key sent again with another
  // call is a 422, not a replay of that result (issue 25, item 12).
  '0018_object_idempotency_request': {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('object_idempotency').addColumn('request_hash', 'text').execute();
    },
  },
};
