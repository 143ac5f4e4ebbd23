import { type Kysely, type Migration } from 'kysely';

/**
 * Schema migrations, applied in key order at start. Never edit a migration that has
 * shipped; add a new one.
 */
export const MIGRATIONS: Record<string, Migration> = {
  '0001_core': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('meta')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('sandboxes')
        .addColumn('uuid', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('backend', 'text', (c) => c.notNull())
        .addColumn('backend_id', 'text')
        .addColumn('image', 'text', (c) => c.notNull())
        .addColumn('vcpus', 'integer', (c) => c.notNull())
        .addColumn('memory_mb', 'integer', (c) => c.notNull())
        .addColumn('profile', 'text', (c) => c.notNull())
        .addColumn('labels', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('description', 'text')
        .addColumn('lifecycle', 'text')
        .addColumn('env', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('source_url', 'text')
        .addColumn('source_ref', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('last_activity_at', 'text')
        .addColumn('expires_at', 'text')
        .addColumn('archived_at', 'text')
        .addColumn('archived_reason', 'text')
        .execute();
      await db.schema
        .createTable('audit_log')
        .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('timestamp', 'text', (c) => c.notNull())
        .addColumn('event', 'text', (c) => c.notNull())
        .addColumn('sandbox', 'text', (c) => c.notNull())
        .addColumn('sandbox_uuid', 'text')
        .addColumn('details', 'text', (c) => c.notNull().defaultTo('{}'))
        .execute();
      await db.schema.createIndex('audit_log_sandbox').on('audit_log').columns(['sandbox', 'timestamp']).execute();
    },
  },
  '0002_lifecycle': {
    async up(db: Kysely<unknown>) {
      // The image a sandbox's container is made from when it is not `image` (a restored
      // snapshot, a recovered archive).
      await db.schema.alterTable('sandboxes').addColumn('root_image', 'text').execute();
      await db.schema
        .createTable('snapshots')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('sandbox', 'text', (c) => c.notNull())
        .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
        .addColumn('image_tag', 'text', (c) => c.notNull())
        .addColumn('backend', 'text', (c) => c.notNull())
        .addColumn('base_image', 'text', (c) => c.notNull())
        .addColumn('vcpus', 'integer', (c) => c.notNull())
        .addColumn('memory_mb', 'integer', (c) => c.notNull())
        .addColumn('profile', 'text', (c) => c.notNull())
        .addColumn('env', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  '0003_browser_events': {
    async up(db: Kysely<unknown>) {
      // Keyed by uuid so a sandbox made again under the same name starts a fresh log; seq starts at 0.
      await db.schema
        .createTable('browser_events')
        .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('page', 'text', (c) => c.notNull())
        .addColumn('ts', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('browser_events_pk', ['sandbox_uuid', 'seq'])
        .execute();
    },
  },
  '0004_detached': {
    async up(db: Kysely<unknown>) {
      // The service's id of a detached command -> the id its sandbox's agent gave it.
      await db.schema
        .createTable('detached_commands')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
        .addColumn('process_id', 'text', (c) => c.notNull())
        .addColumn('pid', 'integer', (c) => c.notNull())
        .addColumn('command', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('detached_commands_sandbox').on('detached_commands').column('sandbox_uuid').execute();
    },
  },
  '0005_detached_results': {
    async up(db: Kysely<unknown>) {
      // The end of a detached command and its output, kept on the host when the service observes
      // it: the sandbox's agent forgets them when the sandbox stops.
      await db.schema.alterTable('detached_commands').addColumn('status', 'text').execute();
      await db.schema.alterTable('detached_commands').addColumn('exit_code', 'integer').execute();
      await db.schema.alterTable('detached_commands').addColumn('finished_at', 'text').execute();
      await db.schema
        .createTable('detached_outputs')
        .addColumn('command_id', 'text', (c) => c.notNull())
        .addColumn('stream', 'text', (c) => c.notNull())
        .addColumn('content', 'blob', (c) => c.notNull())
        .addColumn('start', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('detached_outputs_pk', ['command_id', 'stream'])
        .execute();
    },
  },
  '0006_restore_origin': {
    async up(db: Kysely<unknown>) {
      // A snapshot keeps its sandbox's labels and description, which a restore gives back, and a
      // restored sandbox names the snapshot it came from.
      await db.schema.alterTable('snapshots').addColumn('labels', 'text', (c) => c.notNull().defaultTo('{}')).execute();
      await db.schema.alterTable('snapshots').addColumn('description', 'text').execute();
      await db.schema.alterTable('sandboxes').addColumn('restored_from', 'text').execute();
    },
  },
  '0007_status_reason': {
    async up(db: Kysely<unknown>) {
      // Why a sandbox is in its status (a lost one: which container went, and when it was noticed).
      await db.schema.alterTable('sandboxes').addColumn('status_reason', 'text').execute();
    },
  },
  '0010_disk_quota': {
    async up(db: Kysely<unknown>) {
      // What a sandbox may write in MiB (disk_mb); null for one made without a bound (before this
      // column, or on a backend without diskQuota). A snapshot keeps its sandbox's, for a restore.
      await db.schema.alterTable('sandboxes').addColumn('disk_mb', 'integer').execute();
      await db.schema.alterTable('snapshots').addColumn('disk_mb', 'integer').execute();
    },
  },
};
