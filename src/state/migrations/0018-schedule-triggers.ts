import { type Kysely, type Migration } from 'kysely';

/** Migration 0018_schedule_triggers: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Runs started by POST /schedules/{id}/trigger, counted apart from firings (fire_count).
    await db.schema.alterTable('schedules').addColumn('trigger_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  },
};
