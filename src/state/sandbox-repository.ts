import type { Kysely, Selectable } from 'kysely';
import type { Profile } from '../domain/profiles.js';
import type { Database, SandboxTable } from './schema.js';
import type { Statements } from './store.js';

/**
 * Stored status. `creating`, `archiving` and `removing` are in-flight states that recovery
 * resolves; the allowed moves between them are in services/lifecycle.ts.
 */
export type SandboxStatus = 'creating' | 'running' | 'stopped' | 'archiving' | 'archived' | 'removing';

export interface Lifecycle {
  auto_stop_after_seconds?: number;
  auto_archive_after_seconds?: number;
  auto_delete_after_seconds?: number;
}

export interface SandboxRecord {
  uuid: string;
  name: string;
  status: SandboxStatus;
  backend: string;
  backendId: string | null;
  image: string;
  vcpus: number;
  memoryMb: number;
  profile: Profile;
  labels: Record<string, string>;
  description: string | null;
  lifecycle: Lifecycle | null;
  env: Record<string, string>;
  sourceUrl: string | null;
  sourceRef: string | null;
  createdAt: string;
  updatedAt: string;
  lastActivityAt: string | null;
  expiresAt: string | null;
  archivedAt: string | null;
  archivedReason: string | null;
  /** The image the container is made from when not `image`: a restored snapshot or an archive. */
  rootImage: string | null;
}

type Patch = Partial<Omit<SandboxRecord, 'uuid' | 'name' | 'createdAt'>>;

/** Sandboxes in the state store. */
export class SandboxRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly statements: Statements,
  ) {}

  /** Inserts a new sandbox; false when the name is taken. */
  async insert(record: SandboxRecord): Promise<boolean> {
    const result = await this.db
      .insertInto('sandboxes')
      .values(toRow(record) as SandboxTable)
      .onConflict((oc) => oc.column('name').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  /** Every exec and file operation starts here: a prepared statement. */
  async byName(name: string): Promise<SandboxRecord | undefined> {
    const row = this.statements.get('select * from "sandboxes" where "name" = ?').get(name) as Selectable<SandboxTable> | undefined;
    return row && fromRow(row);
  }

  async byUuid(uuid: string): Promise<SandboxRecord | undefined> {
    const row = this.statements.get('select * from "sandboxes" where "uuid" = ?').get(uuid) as Selectable<SandboxTable> | undefined;
    return row && fromRow(row);
  }

  /** All sandboxes, oldest first. */
  async all(): Promise<SandboxRecord[]> {
    const rows = await this.db.selectFrom('sandboxes').selectAll().orderBy('created_at').orderBy('name').execute();
    return rows.map(fromRow);
  }

  /** How many sandboxes exist (in-flight creates included, so limits hold under races). */
  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('sandboxes')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '!=', 'removing')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Applies a patch atomically. With `from`, only when the stored status is one of those;
   * returns false when nothing matched.
   */
  async update(uuid: string, patch: Patch, from?: readonly SandboxStatus[]): Promise<boolean> {
    // One prepared statement per shape (columns set, statuses allowed): every exec touches
    // last_activity_at through here. Column names come from toRow, never from the caller.
    const row = toRow(patch);
    const columns = Object.keys(row);
    if (columns.length === 0) throw new Error('sandbox update without a field to set');
    const sql =
      `update "sandboxes" set ${columns.map((column) => `"${column}" = ?`).join(', ')} where "uuid" = ?` +
      (from ? ` and "status" in (${from.map(() => '?').join(', ')})` : '');
    const result = this.statements.get(sql).run(...Object.values(row), uuid, ...(from ?? []));
    return result.changes === 1;
  }

  async delete(uuid: string): Promise<void> {
    await this.db.deleteFrom('sandboxes').where('uuid', '=', uuid).execute();
  }
}

const json = (value: unknown) => (value === undefined ? undefined : value === null ? null : JSON.stringify(value));

function toRow(r: Partial<SandboxRecord>): Partial<SandboxTable> {
  const row: Partial<SandboxTable> = {
    uuid: r.uuid,
    name: r.name,
    status: r.status,
    backend: r.backend,
    backend_id: r.backendId,
    image: r.image,
    vcpus: r.vcpus,
    memory_mb: r.memoryMb,
    profile: r.profile,
    labels: json(r.labels) as string | undefined,
    description: r.description,
    lifecycle: json(r.lifecycle),
    env: json(r.env) as string | undefined,
    source_url: r.sourceUrl,
    source_ref: r.sourceRef,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    last_activity_at: r.lastActivityAt,
    expires_at: r.expiresAt,
    archived_at: r.archivedAt,
    archived_reason: r.archivedReason,
    root_image: r.rootImage,
  };
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== undefined)) as Partial<SandboxTable>;
}

function fromRow(row: Selectable<SandboxTable>): SandboxRecord {
  return {
    uuid: row.uuid,
    name: row.name,
    status: row.status as SandboxStatus,
    backend: row.backend,
    backendId: row.backend_id,
    image: row.image,
    vcpus: row.vcpus,
    memoryMb: row.memory_mb,
    profile: row.profile as Profile,
    labels: JSON.parse(row.labels) as Record<string, string>,
    description: row.description,
    lifecycle: row.lifecycle ? (JSON.parse(row.lifecycle) as Lifecycle) : null,
    env: JSON.parse(row.env) as Record<string, string>,
    sourceUrl: row.source_url,
    sourceRef: row.source_ref,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastActivityAt: row.last_activity_at,
    expiresAt: row.expires_at,
    archivedAt: row.archived_at,
    archivedReason: row.archived_reason,
    rootImage: row.root_image,
  };
}
