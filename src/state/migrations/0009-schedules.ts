import { type Kysely, type Migration } from 'kysely';

/** Migration 0009_schedules: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Schedules and their runs. Times are RFC 3339 UTC text with milliseconds (toISOString), so
    // that they sort as text and the claim can compare next_fire_at for equality.
    await db.schema
      .createTable('schedules')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('cron', 'text')
      .addColumn('fire_at', 'text')
      .addColumn('timezone', 'text', (c) => c.notNull())
      .addColumn('method', 'text', (c) => c.notNull())
      .addColumn('args', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('target_class', 'text')
      .addColumn('target_object_id', 'text')
      .addColumn('target_orchestration', 'text')
      .addColumn('target_sandbox', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('overlap', 'text', (c) => c.notNull())
      .addColumn('misfire', 'text', (c) => c.notNull())
      .addColumn('end_at', 'text')
      .addColumn('next_fire_at', 'text')
      .addColumn('last_fired_at', 'text')
      .addColumn('last_run_status', 'text')
      .addColumn('fire_count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('schedules_due').on('schedules').columns(['status', 'next_fire_at']).execute();
    await db.schema
      .createTable('schedule_runs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('schedule_id', 'text', (c) => c.notNull())
      .addColumn('scheduled_for', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('finished_at', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('missed_count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('duration_ms', 'integer')
      .addColumn('result', 'text')
      .addColumn('error', 'text')
      .addColumn('orchestration_id', 'text')
      // 1 for the first try; 2 when recovery retried an object-method run after a crash.
      .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(1))
      // Whether the run came from POST /schedules/{id}/trigger (it moves nothing of the schedule).
      .addColumn('manual', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.createIndex('schedule_runs_schedule').on('schedule_runs').columns(['schedule_id', 'id']).execute();
    await db.schema.createIndex('schedule_runs_status').on('schedule_runs').column('status').execute();
  },
};
