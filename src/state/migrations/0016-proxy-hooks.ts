import { type Kysely, type Migration } from 'kysely';

/** Migration 0016_proxy_hooks: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Hooks of the egress proxy, applied in creation order (id); `match` and `target` are JSON.
    await db.schema
      .createTable('proxy_hooks')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('event', 'text', (c) => c.notNull())
      .addColumn('match', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('target', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    // Sandbox secrets: the placeholder in the sandbox's env, the host (glob) it is swapped
    // toward, and the value as SecretBox ciphertext. Gone with the sandbox.
    await db.schema
      .createTable('sandbox_secrets')
      .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('host', 'text', (c) => c.notNull())
      .addColumn('placeholder', 'text', (c) => c.notNull())
      .addColumn('secret', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('sandbox_secrets_pk', ['sandbox_uuid', 'name'])
      .execute();
    // `{ENV_NAME: host}` of a sandbox's secrets (SPEC secret_mappings), JSON; null without secrets.
    await db.schema.alterTable('sandboxes').addColumn('secret_mappings', 'text').execute();
  },
};
