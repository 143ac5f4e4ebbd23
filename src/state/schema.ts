import type { Generated } from 'kysely';

/**
 * Row shapes of the state store. JSON columns hold serialised objects. The records the
 * repositories hand out spell every field as its column is named (see row-codec.ts).
 */
export interface SandboxTable {
  uuid: string;
  name: string;
  /** creating | running | stopped | lost | archived | removing */
  status: string;
  /** Why the sandbox has its status, where that needs saying (`lost`: what happened to its container). */
  status_reason: string | null;
  backend: string;
  backend_id: string | null;
  image: string;
  vcpus: number;
  memory_mb: number;
  /** What the sandbox may write in MiB; null: no bound (made before disk_mb, or on a backend without a quota). */
  disk_mb: number | null;
  profile: string;
  labels: string;
  description: string | null;
  lifecycle: string | null;
  env: string;
  source_url: string | null;
  source_ref: string | null;
  created_at: string;
  updated_at: string;
  last_activity_at: string | null;
  expires_at: string | null;
  archived_at: string | null;
  archived_reason: string | null;
  /** The image the container is made from when not `image`: a restored snapshot or an archive. */
  root_image: string | null;
  /** The snapshot this sandbox was restored from; null for one made otherwise. */
  restored_from: string | null;
  /** JSON `{ENV_NAME: host}` of the sandbox's secrets (values in sandbox_secrets); null without. */
  secret_mappings: string | null;
  /** JSON {egress, allow, deny}; null: the profile's default egress, no lists. */
  network: string | null;
  /** JSON array of the named volumes it mounts, [{name, path, read_only?}]; null: none. */
  volumes: string | null;
  /** 1: made by the server for itself (a durable object's sandbox), listed only on request. */
  internal: number;
}

export interface SnapshotTable {
  name: string;
  /** creating | ready | deleting */
  status: string;
  sandbox: string;
  sandbox_uuid: string;
  image_tag: string;
  backend: string;
  base_image: string;
  vcpus: number;
  memory_mb: number;
  /** The sandbox's disk_mb when the snapshot was taken (null: it had none). */
  disk_mb: number | null;
  profile: string;
  env: string;
  created_at: string;
  /** JSON object: the sandbox's labels when the snapshot was taken. */
  labels: string;
  description: string | null;
  /** JSON array: the volumes the sandbox mounted, whose contents the snapshot does not hold; null: none. */
  volumes: string | null;
}

export interface AuditTable {
  id: Generated<number>;
  timestamp: string;
  event: string;
  sandbox: string;
  sandbox_uuid: string | null;
  details: string;
}

/** One browser action, numbered per sandbox from 0. */
export interface BrowserEventTable {
  sandbox_uuid: string;
  seq: number;
  /** page.created | page.navigated | page.clicked | page.filled | page.closed */
  type: string;
  page: string;
  ts: string;
}

export interface DetachedCommandTable {
  id: string;
  sandbox_uuid: string;
  /** The backend's id of the process within its sandbox. */
  process_id: string;
  pid: number;
  /** JSON argv. */
  command: string;
  started_at: string;
  /** Null until the service observes the end: completed | failed | killed | lost. */
  status: string | null;
  exit_code: number | null;
  finished_at: string | null;
}

/** The output of an ended detached command, kept on the host (the sandbox's copy dies with it). */
export interface DetachedOutputTable {
  command_id: string;
  /** stdout | stderr */
  stream: string;
  content: Buffer;
  /** The byte position of `content` in everything the stream printed (earlier bytes were dropped). */
  start: number;
}

/** A registered durable-object class: its module source and the settings of its objects' sandboxes. */
export interface ObjectClassTable {
  name: string;
  /** node | python */
  runtime: string;
  /** The module, as registered or as made from `handlers`. */
  source: string;
  /** JSON {name: "(input, state) => ..."} when registered in the handlers form; null otherwise. */
  handlers: string | null;
  image: string;
  profile: string;
  vcpus: number;
  memory_mb: number;
  timeout_ms: number;
  idle_timeout_seconds: number;
  max_storage_bytes: number;
  /** JSON argv run once per sandbox and class version; null for none. */
  setup: string | null;
  /** JSON list of the module's callable methods, from the first describe; null until then. */
  methods: string | null;
  version: number;
  sha256: string;
  created_at: string;
  updated_at: string;
}

/** A durable object: its storage and single alarm live here, never in its sandbox. */
export interface ObjectTable {
  id: string;
  class: string;
  object_id: string;
  /** active | hibernating */
  status: string;
  /** The sandbox its methods run in: its managed `obj-<hex>` sandbox, or a bound one. */
  sandbox: string;
  /** 1 when the object service made the sandbox (and stops and removes it); 0 when bound. */
  sandbox_managed: number;
  /** JSON object. */
  storage: string;
  storage_bytes: number;
  idle_timeout_seconds: number;
  /** The alarm's due time (RFC 3339); null when the object has no alarm. */
  alarm_at: string | null;
  alarm_method: string | null;
  /** JSON. */
  alarm_args: string | null;
  /** Failed attempts of the current alarm. */
  alarm_attempts: number;
  /** When the alarm is next tried: `alarm_at`, or later after failures; indexed for the timers. */
  alarm_retry_at: string | null;
  last_alarm_error: string | null;
  last_call_at: string | null;
  call_count: number;
  created_at: string;
  updated_at: string;
  /** The number its processes run as when bound (uid 200000 + it): set by the insert (migration 0025_object_uid). */
  uid_number: number | null;
}

/** One call of an object's method, kept for its call log (the last 100 per object). */
export interface ObjectCallTable {
  /** UUIDv7: orders the log. */
  call_id: string;
  /** The object's id. */
  object: string;
  method: string;
  /** http | alarm | schedule | orchestration | mcp */
  source: string;
  started_at: string;
  duration_ms: number;
  /** ok | threw | timeout | error */
  outcome: string;
  error: string | null;
  cold_start: number;
  idempotency_key: string | null;
}

/** The outcome of a call made with an Idempotency-Key, kept 24 hours. */
export interface ObjectIdempotencyTable {
  object: string;
  key: string;
  /** JSON of the result, when kept (up to 1 MiB). */
  result: string | null;
  result_kept: number;
  created_at: string;
  /** sha256 of the call's method and arguments (null: kept before it was recorded). */
  request_hash: string | null;
}

/** A schedule: when it fires (cron or fire_at) and what it runs. Times are RFC 3339 UTC text. */
export interface ScheduleTable {
  id: string;
  name: string;
  cron: string | null;
  fire_at: string | null;
  /** IANA zone the cron expression is read in. */
  timezone: string;
  method: string;
  /** JSON: the target's arguments. */
  args: string;
  target_class: string | null;
  target_object_id: string | null;
  target_orchestration: string | null;
  target_sandbox: string | null;
  /** active | paused | completed | failed */
  status: string;
  /** skip | allow */
  overlap: string;
  /** fire_once | skip */
  misfire: string;
  end_at: string | null;
  /** The occurrence the next claim is for; null when nothing is due (paused, done). */
  next_fire_at: string | null;
  last_fired_at: string | null;
  last_run_status: string | null;
  fire_count: number;
  /** Runs started by a trigger, which fire_count does not count. */
  trigger_count: number;
  created_at: string;
  updated_at: string;
}

/** One firing of a schedule (or a record of firings that were skipped or missed). */
export interface ScheduleRunTable {
  id: string;
  schedule_id: string;
  scheduled_for: string;
  started_at: string;
  finished_at: string | null;
  /** running | succeeded | failed | skipped | missed | interrupted */
  status: string;
  missed_count: number;
  duration_ms: number | null;
  /** JSON: what the target returned, capped. */
  result: string | null;
  error: string | null;
  orchestration_id: string | null;
  /** 1; 2 once recovery retried an object-method run. */
  attempt: number;
  /** 1 for a run of POST /schedules/{id}/trigger. */
  manual: number;
}

/** A durable store (a database on the host or an external server the API speaks to). */
export interface StoreTable {
  id: string;
  name: string;
  /** sqlite | kv | queue | postgres | mysql | redis */
  kind: string;
  /** The bound sandbox's name and uuid; null for a store of no sandbox. */
  sandbox: string | null;
  sandbox_uuid: string | null;
  /** JSON object: the engine's config, without secrets. */
  config: string;
  /** SecretBox ciphertext of the password; null without one. */
  secret: string | null;
  /** ok | unreachable: how the last use of an external store went. */
  status: string;
  created_at: string;
  updated_at: string;
}

/** One policy decision kept in the audit ring. */
export interface PolicyAuditTable {
  id: Generated<number>;
  timestamp: string;
  principal: string;
  action: string;
  resource: string;
  decision: 'allow' | 'deny';
  /** The deciding rule's id; null for a grant or the default. */
  rule: string | null;
  reason: string;
  /** audit: a deny that was let through. */
  mode: 'enforce' | 'audit';
}

/** A permission grant of scope `always`. */
export interface PermissionTable {
  id: string;
  principal: string;
  action: string;
  /** Glob over resources such as sandbox:build-*. */
  resource: string;
  /** JSON object: context values the request must have (sudo: true for a sudo_exec grant). */
  conditions: string;
  expires_at: string | null;
  uses: number;
  granted_by: string;
  granted_at: string;
}

/** A provider key of the LLM gateway: sealed, or the name of a server environment variable. */
/** A hook of the egress proxy; `match` and `target` are JSON. */
export interface ProxyHookTable {
  id: Generated<number>;
  name: string;
  event: string;
  match: string;
  target: string;
  created_at: string;
}

/** A decision of the egress proxy: `entry` is the ProxyLogEntry as JSON. */
export interface ProxyDecisionTable {
  id: Generated<number>;
  sandbox: string;
  entry: string;
}

/** A sandbox secret: `secret` is SecretBox ciphertext of the value. */
export interface SandboxSecretTable {
  sandbox_uuid: string;
  name: string;
  host: string;
  placeholder: string;
  secret: string;
  /** 1: also swapped in HTTPS requests (TLS interception toward its host). */
  intercept_tls: number;
}

/** The egress proxy's CA (one row, id 1): the certificate and its key as SecretBox ciphertext. */
export interface EgressCaTable {
  id: number;
  cert: string;
  key: string;
  created_at: string;
}

export interface LlmKeyTable {
  provider: string;
  /** SecretBox ciphertext of the key; null when `env` names where it is read. */
  secret: string | null;
  env: string | null;
  /** The last four characters of a stored key (shown to tell keys apart); null for env keys. */
  last4: string | null;
  /** The upstream this key is for, when it overrides the provider's. */
  base_url: string | null;
  updated_at: string;
}

/** Token usage counted by the LLM gateway, per day (UTC, YYYY-MM-DD), sandbox, provider and model. */
export interface LlmUsageTable {
  day: string;
  sandbox_uuid: string;
  sandbox: string;
  provider: string;
  /** The model the provider named; "" when neither the answer nor the request said. */
  model: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  /** Requests answered with an error (an upstream 4xx/5xx, an upstream that failed). */
  errors: number;
  /** Successful requests whose answer carried no usage the gateway could read. */
  unmetered_requests: number;
}

/** A sandbox's LLM token budget. */
export interface LlmBudgetTable {
  sandbox_uuid: string;
  budget_tokens: number;
}

/** An orchestration definition: the validated DSL as JSON; `version` moves when `hash` does. */
export interface OrchestrationDefinitionTable {
  name: string;
  version: number;
  /** JSON: the validated definition. */
  content: string;
  /** definitionHash of the content. */
  hash: string;
  created_at: string;
  updated_at: string;
}

/** An orchestration instance. Output, error and times mirror its history, for listing. */
export interface OrchestrationTable {
  id: string;
  name: string;
  definition_version: number;
  /** JSON: the definition snapshot the instance started with. */
  definition: string;
  /** pending | running | waiting | completed | failed | terminated */
  status: string;
  /** JSON; null: JSON null. */
  input: string | null;
  /** JSON; null until completed. */
  output: string | null;
  error: string | null;
  failed_step: string | null;
  /** The key of a caller that starts idempotently without choosing the id (a schedule's run). */
  caller_key: string | null;
  /** When a pending instance starts; null once started or when it started at once. */
  start_at: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  completed_at: string | null;
}

/** One event of an instance's history. */
export interface OrchestrationHistoryTable {
  instance: string;
  sequence: number;
  type: string;
  step: string | null;
  /** JSON */
  data: string;
  timestamp: string;
}

/** An open activity attempt of an instance. */
export interface OrchestrationTaskTable {
  instance: string;
  step: string;
  attempt: number;
  /** scheduled | running */
  state: string;
  /** JSON: the interpreter's ActivityCommand. */
  command: string;
}

/** A due time of an instance's step: a timer, a wait's deadline, a retry's back-off. */
export interface OrchestrationTimerTable {
  instance: string;
  step: string;
  fire_at: string;
}

/** A server sharing the database (a replica) and its heartbeat, in epoch milliseconds. */
export interface ReplicaTable {
  id: string;
  host: string;
  /** The replica's own data directory: a replica that starts on it is the next life of the one before. */
  data_dir: string;
  pid: number;
  url: string | null;
  started_at: number;
  heartbeat_at: number;
}

export interface MetaTable {
  key: string;
  value: string;
}

export interface Database {
  sandboxes: SandboxTable;
  audit_log: AuditTable;
  snapshots: SnapshotTable;
  browser_events: BrowserEventTable;
  detached_commands: DetachedCommandTable;
  detached_outputs: DetachedOutputTable;
  object_classes: ObjectClassTable;
  objects: ObjectTable;
  object_calls: ObjectCallTable;
  object_idempotency: ObjectIdempotencyTable;
  schedules: ScheduleTable;
  schedule_runs: ScheduleRunTable;
  stores: StoreTable;
  policy_audit: PolicyAuditTable;
  permissions: PermissionTable;
  llm_keys: LlmKeyTable;
  llm_usage: LlmUsageTable;
  llm_budgets: LlmBudgetTable;
  proxy_hooks: ProxyHookTable;
  proxy_decisions: ProxyDecisionTable;
  sandbox_secrets: SandboxSecretTable;
  egress_ca: EgressCaTable;
  orchestration_definitions: OrchestrationDefinitionTable;
  orchestrations: OrchestrationTable;
  orchestration_history: OrchestrationHistoryTable;
  orchestration_tasks: OrchestrationTaskTable;
  orchestration_timers: OrchestrationTimerTable;
  meta: MetaTable;
  replicas: ReplicaTable;
}
