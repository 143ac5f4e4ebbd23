import { type Kysely, type Migration } from 'kysely';

/** Migration 0001_core: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('meta')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('value', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('sandboxes')
      .addColumn('uuid', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('backend', 'text', (c) => c.notNull())
      .addColumn('backend_id', 'text')
      .addColumn('image', 'text', (c) => c.notNull())
      .addColumn('vcpus', 'integer', (c) => c.notNull())
      .addColumn('memory_mb', 'integer', (c) => c.notNull())
      .addColumn('profile', 'text', (c) => c.notNull())
      .addColumn('labels', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('description', 'text')
      .addColumn('lifecycle', 'text')
      .addColumn('env', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('source_url', 'text')
      .addColumn('source_ref', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addColumn('last_activity_at', 'text')
      .addColumn('expires_at', 'text')
      .addColumn('archived_at', 'text')
      .addColumn('archived_reason', 'text')
      .execute();
    await db.schema
      .createTable('audit_log')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('timestamp', 'text', (c) => c.notNull())
      .addColumn('event', 'text', (c) => c.notNull())
      .addColumn('sandbox', 'text', (c) => c.notNull())
      .addColumn('sandbox_uuid', 'text')
      .addColumn('details', 'text', (c) => c.notNull().defaultTo('{}'))
      .execute();
    await db.schema.createIndex('audit_log_sandbox').on('audit_log').columns(['sandbox', 'timestamp']).execute();
  },
};
