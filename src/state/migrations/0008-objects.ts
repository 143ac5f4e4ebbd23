import { type Kysely, type Migration } from 'kysely';

/** Migration 0008_objects: never edit it once shipped; add a new migration. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Durable objects: registered classes (their source, versioned), objects with their storage
    // and single alarm, each object's call log, and the results kept for idempotency keys.
    await db.schema
      .createTable('object_classes')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('runtime', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('handlers', 'text')
      .addColumn('image', 'text', (c) => c.notNull())
      .addColumn('profile', 'text', (c) => c.notNull())
      .addColumn('vcpus', 'integer', (c) => c.notNull())
      .addColumn('memory_mb', 'integer', (c) => c.notNull())
      .addColumn('timeout_ms', 'integer', (c) => c.notNull())
      .addColumn('idle_timeout_seconds', 'integer', (c) => c.notNull())
      .addColumn('max_storage_bytes', 'integer', (c) => c.notNull())
      .addColumn('setup', 'text')
      .addColumn('methods', 'text')
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('sha256', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('objects')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('class', 'text', (c) => c.notNull())
      .addColumn('object_id', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('sandbox', 'text', (c) => c.notNull())
      .addColumn('sandbox_managed', 'integer', (c) => c.notNull())
      .addColumn('storage', 'text', (c) => c.notNull())
      .addColumn('storage_bytes', 'integer', (c) => c.notNull())
      .addColumn('idle_timeout_seconds', 'integer', (c) => c.notNull())
      .addColumn('alarm_at', 'text')
      .addColumn('alarm_method', 'text')
      .addColumn('alarm_args', 'text')
      .addColumn('alarm_attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('alarm_retry_at', 'text')
      .addColumn('last_alarm_error', 'text')
      .addColumn('last_call_at', 'text')
      .addColumn('call_count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('objects_class_object_id', ['class', 'object_id'])
      .execute();
    await db.schema.createIndex('objects_alarm').on('objects').column('alarm_retry_at').execute();
    await db.schema
      .createTable('object_calls')
      .addColumn('call_id', 'text', (c) => c.primaryKey())
      .addColumn('object', 'text', (c) => c.notNull())
      .addColumn('method', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('duration_ms', 'integer', (c) => c.notNull())
      .addColumn('outcome', 'text', (c) => c.notNull())
      .addColumn('error', 'text')
      .addColumn('cold_start', 'integer', (c) => c.notNull())
      .addColumn('idempotency_key', 'text')
      .execute();
    await db.schema.createIndex('object_calls_object').on('object_calls').columns(['object', 'call_id']).execute();
    await db.schema
      .createTable('object_idempotency')
      .addColumn('object', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('result', 'text')
      .addColumn('result_kept', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('object_idempotency_pk', ['object', 'key'])
      .execute();
  },
};
