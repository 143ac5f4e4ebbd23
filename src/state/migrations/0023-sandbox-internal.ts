import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Migration 0023_sandbox_internal: never edit it once shipped; add a new migration.
 *
 * `internal` (0/1) marks a sandbox the server made for itself (a durable object's managed
 * `obj-<hex>` sandbox): GET /sandboxes leaves those out unless `?internal=true`. The managed
 * sandboxes of existing objects are marked at once.
 */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`ALTER TABLE sandboxes ADD COLUMN internal INTEGER NOT NULL DEFAULT 0`.execute(db);
    await sql`UPDATE sandboxes SET internal = 1 WHERE name IN (SELECT sandbox FROM objects WHERE sandbox_managed = 1)`.execute(db);
  },
};
