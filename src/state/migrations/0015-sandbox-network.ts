import { type Kysely, type Migration } from 'kysely';

/** Migration 0015_sandbox_network: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // A sandbox's `network` field (JSON {egress, allow, deny}); NULL: its profile's default
    // (open, none for restrictive), which is what every sandbox made before it had.
    await db.schema.alterTable('sandboxes').addColumn('network', 'text').execute();
  },
};
