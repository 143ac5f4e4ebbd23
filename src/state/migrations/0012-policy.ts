import { type Kysely, type Migration } from 'kysely';

/** Migration 0012_policy: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The policy audit ring (the newest 10,000 decisions kept) and the permission grants of
    // scope `always` (`once` and `session` grants live in memory and end with the process).
    await db.schema
      .createTable('policy_audit')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('timestamp', 'text', (c) => c.notNull())
      .addColumn('principal', 'text', (c) => c.notNull())
      .addColumn('action', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('decision', 'text', (c) => c.notNull())
      .addColumn('rule', 'text')
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('permissions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('principal', 'text', (c) => c.notNull())
      .addColumn('action', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('conditions', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('expires_at', 'text')
      .addColumn('uses', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('granted_by', 'text', (c) => c.notNull())
      .addColumn('granted_at', 'text', (c) => c.notNull())
      .execute();
  },
};
