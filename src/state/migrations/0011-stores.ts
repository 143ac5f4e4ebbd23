import { type Kysely, type Migration } from 'kysely';

/** Migration 0011_stores: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Durable stores. `config` is the engine's config in clear (JSON, without secrets); `secret`
    // is the SecretBox ciphertext of the password, null without one. A store bound to a sandbox
    // keeps the sandbox's uuid, by which it is deleted with the sandbox.
    await db.schema
      .createTable('stores')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('sandbox', 'text')
      .addColumn('sandbox_uuid', 'text')
      .addColumn('config', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('secret', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('stores_sandbox_uuid').on('stores').column('sandbox_uuid').execute();
  },
};
