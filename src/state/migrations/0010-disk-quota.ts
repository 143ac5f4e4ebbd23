import { type Kysely, type Migration } from 'kysely';

/** Migration 0010_disk_quota: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // What a sandbox may write in MiB (disk_mb); null for one made without a bound (before this
    // column, or on a backend without diskQuota). A snapshot keeps its sandbox's, for a restore.
    await db.schema.alterTable('sandboxes').addColumn('disk_mb', 'integer').execute();
    await db.schema.alterTable('snapshots').addColumn('disk_mb', 'integer').execute();
  },
};
