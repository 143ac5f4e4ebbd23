import { type Kysely, type Migration } from 'kysely';

/** Migration 0019_egress_ca: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The egress proxy's CA for TLS interception toward secret hosts: one row, made on first
    // use. `cert` is the PEM certificate (public); `key` the PEM private key as SecretBox ciphertext.
    await db.schema
      .createTable('egress_ca')
      .addColumn('id', 'integer', (c) => c.primaryKey())
      .addColumn('cert', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    // 1: the secret is also swapped in HTTPS requests to its host (the proxy terminates TLS there).
    await db.schema.alterTable('sandbox_secrets').addColumn('intercept_tls', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  },
};
