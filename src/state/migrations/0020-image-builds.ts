import { type Kysely, type Migration } from 'kysely';

/** Migration 0020_image_builds (the images domain's): never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Image builds, recorded before the engine starts one: at start, a row still `running` is a
    // build the last process was cut in (its engine objects carry `sandboxd.build=<id>`).
    await db.schema
      .createTable('image_builds')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('error', 'text')
      .addColumn('image_id', 'text')
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('finished_at', 'text')
      .execute();
    await db.schema.createIndex('image_builds_started').on('image_builds').columns(['started_at']).execute();
  },
};
