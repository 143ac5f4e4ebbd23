import { type Kysely, type Migration } from 'kysely';

/** Migration 0017_volumes: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // JSON array of the named volumes the sandbox mounts ([{name, path, read_only?}]); null: none.
    await db.schema.alterTable('sandboxes').addColumn('volumes', 'text').execute();
    // The volumes the source sandbox mounted when a snapshot was taken: their contents are not in it.
    await db.schema.alterTable('snapshots').addColumn('volumes', 'text').execute();
  },
};
