import { type Kysely, type Migration } from 'kysely';

/**
 * Migration 0024_proxy_decisions (the egress domain's): never edit it once shipped; add a new
 * migration.
 *
 * The egress proxy's decisions (`GET /proxy/log`), a ring in memory before: one row each, the
 * entry as JSON, the newest 10,000 kept (ProxyLog prunes older ones as it writes).
 */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('proxy_decisions')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('sandbox', 'text', (c) => c.notNull())
      .addColumn('entry', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('proxy_decisions_sandbox').on('proxy_decisions').columns(['sandbox', 'id']).execute();
  },
};
