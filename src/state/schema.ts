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
  meta: MetaTable;
}
