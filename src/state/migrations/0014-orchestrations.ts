import { type Kysely, type Migration } from 'kysely';

/** Migration 0014_orchestrations: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Orchestrations: definitions (the validated DSL as JSON, versioned by content hash),
    // instances (a snapshot of the definition they started with), the event-sourced history,
    // and the open work a restart re-arms: activity tasks and timer rows. Every transition
    // rewrites an instance's tasks and timers with its history in one transaction.
    await db.schema
      .createTable('orchestration_definitions')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('content', 'text', (c) => c.notNull())
      .addColumn('hash', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('orchestrations')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('definition_version', 'integer', (c) => c.notNull())
      .addColumn('definition', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      // JSON; SQL NULL is JSON null (RowCodec keeps null both ways).
      .addColumn('input', 'text')
      .addColumn('output', 'text')
      .addColumn('error', 'text')
      .addColumn('failed_step', 'text')
      .addColumn('caller_key', 'text', (c) => c.unique())
      .addColumn('start_at', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text')
      .addColumn('completed_at', 'text')
      .execute();
    await db.schema.createIndex('orchestrations_status').on('orchestrations').columns(['status', 'id']).execute();
    await db.schema.createIndex('orchestrations_name').on('orchestrations').columns(['name', 'id']).execute();
    await db.schema
      .createTable('orchestration_history')
      .addColumn('instance', 'text', (c) => c.notNull())
      .addColumn('sequence', 'integer', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('step', 'text')
      .addColumn('data', 'text', (c) => c.notNull())
      .addColumn('timestamp', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('orchestration_history_pk', ['instance', 'sequence'])
      .execute();
    await db.schema
      .createTable('orchestration_tasks')
      .addColumn('instance', 'text', (c) => c.notNull())
      .addColumn('step', 'text', (c) => c.notNull())
      .addColumn('attempt', 'integer', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('command', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('orchestration_tasks_pk', ['instance', 'step'])
      .execute();
    await db.schema
      .createTable('orchestration_timers')
      .addColumn('instance', 'text', (c) => c.notNull())
      .addColumn('step', 'text', (c) => c.notNull())
      .addColumn('fire_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('orchestration_timers_pk', ['instance', 'step'])
      .execute();
    await db.schema.createIndex('orchestration_timers_fire_at').on('orchestration_timers').column('fire_at').execute();
  },
};
