import { type Kysely, type Migration } from 'kysely';

/** Migration 0002_lifecycle: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The image a sandbox's container is made from when it is not `image` (a restored
    // snapshot, a recovered archive).
    await db.schema.alterTable('sandboxes').addColumn('root_image', 'text').execute();
    await db.schema
      .createTable('snapshots')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('sandbox', 'text', (c) => c.notNull())
      .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
      .addColumn('image_tag', 'text', (c) => c.notNull())
      .addColumn('backend', 'text', (c) => c.notNull())
      .addColumn('base_image', 'text', (c) => c.notNull())
      .addColumn('vcpus', 'integer', (c) => c.notNull())
      .addColumn('memory_mb', 'integer', (c) => c.notNull())
      .addColumn('profile', 'text', (c) => c.notNull())
      .addColumn('env', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
  },
};
