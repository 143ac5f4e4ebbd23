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
  '0008_objects': {
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
  },
  '0009_schedules': {
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
  },
  '0010_disk_quota': {
    async up(db: Kysely<unknown>) {
      // What a sandbox may write in MiB (disk_mb); null for one made without a bound (before this
      // column, or on a backend without diskQuota). A snapshot keeps its sandbox's, for a restore.
      await db.schema.alterTable('sandboxes').addColumn('disk_mb', 'integer').execute();
      await db.schema.alterTable('snapshots').addColumn('disk_mb', 'integer').execute();
    },
  },
  '0011_stores': {
    async up(db: Kysely<unknown>) {
      // Durable stores. `config` is the engine's config in clear (JSON, without secrets); `secret`
      // is the SecretBox ciphertext of the password, null without one. A store bound to a sandbox
      // keeps the sandbox's uuid, by which it is deleted with the sandbox.
      await db.schema
        .createTable('stores')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('sandbox', 'text')
        .addColumn('sandbox_uuid', 'text')
        .addColumn('config', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('secret', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('stores_sandbox_uuid').on('stores').column('sandbox_uuid').execute();
    },
  },
  '0012_policy': {
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
  },
  '0013_llm': {
    async up(db: Kysely<unknown>) {
      // Provider keys of the LLM gateway. `secret` is the SecretBox ciphertext of a stored key;
      // `env` names a server environment variable read at each request instead. Exactly one is set.
      await db.schema
        .createTable('llm_keys')
        .addColumn('provider', 'text', (c) => c.primaryKey())
        .addColumn('secret', 'text')
        .addColumn('env', 'text')
        .addColumn('last4', 'text')
        .addColumn('base_url', 'text')
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      // Token usage counted by the gateway, one row per day, sandbox, provider and model. The
      // sandbox's name is kept beside its uuid, so that usage outlives the sandbox.
      await db.schema
        .createTable('llm_usage')
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('sandbox_uuid', 'text', (c) => c.notNull())
        .addColumn('sandbox', 'text', (c) => c.notNull())
        .addColumn('provider', 'text', (c) => c.notNull())
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('requests', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('errors', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('unmetered_requests', 'integer', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('llm_usage_key', ['day', 'sandbox_uuid', 'provider', 'model'])
        .execute();
      await db.schema.createIndex('llm_usage_sandbox').on('llm_usage').columns(['sandbox', 'day']).execute();
      await db.schema.createIndex('llm_usage_sandbox_uuid').on('llm_usage').column('sandbox_uuid').execute();
      // Per-sandbox token budgets (sandbox create field llm_budget_tokens); gone with the sandbox.
      await db.schema
        .createTable('llm_budgets')
        .addColumn('sandbox_uuid', 'text', (c) => c.primaryKey())
        .addColumn('budget_tokens', 'integer', (c) => c.notNull())
        .execute();
    },
  },
  '0014_orchestrations': {
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
  },
  '0015_sandbox_network': {
    async up(db: Kysely<unknown>) {
      // A sandbox's `network` field (JSON {egress, allow, deny}); NULL: its profile's default
      // (open, none for restrictive), which is what every sandbox made before it had.
      await db.schema.alterTable('sandboxes').addColumn('network', 'text').execute();
    },
  },
  '0016_proxy_hooks': {
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
  },
  '0017_volumes': {
    async up(db: Kysely<unknown>) {
      // JSON array of the named volumes the sandbox mounts ([{name, path, read_only?}]); null: none.
      await db.schema.alterTable('sandboxes').addColumn('volumes', 'text').execute();
      // The volumes the source sandbox mounted when a snapshot was taken: their contents are not in it.
      await db.schema.alterTable('snapshots').addColumn('volumes', 'text').execute();
    },
  },
};
