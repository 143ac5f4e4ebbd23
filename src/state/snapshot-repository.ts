import type { Kysely, Selectable } from 'kysely';
import type { Profile } from '../domain/profiles.js';
import type { Database, SnapshotTable } from './schema.js';

/** `creating` and `deleting` are in-flight states that recovery resolves. */
export type SnapshotStatus = 'creating' | 'ready' | 'deleting';

/** A snapshot as stored: the source, the image and the settings a restore gets. */
export interface SnapshotRecord {
  name: string;
  status: SnapshotStatus;
  /** Source sandbox name and uuid (the sandbox may be gone since). */
  sandbox: string;
  sandboxUuid: string;
  imageTag: string;
  backend: string;
  baseImage: string;
  vcpus: number;
  memoryMb: number;
  profile: Profile;
  env: Record<string, string>;
  createdAt: string;
}

/** Snapshots in the state store. */
export class SnapshotRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a new snapshot; false when the name is taken. */
  async insert(record: SnapshotRecord): Promise<boolean> {
    const result = await this.db
      .insertInto('snapshots')
      .values(toRow(record))
      .onConflict((oc) => oc.column('name').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  async byName(name: string): Promise<SnapshotRecord | undefined> {
    const row = await this.db.selectFrom('snapshots').selectAll().where('name', '=', name).executeTakeFirst();
    return row && fromRow(row);
  }

  /** All snapshots, oldest first. */
  async all(): Promise<SnapshotRecord[]> {
    const rows = await this.db.selectFrom('snapshots').selectAll().orderBy('created_at').orderBy('name').execute();
    return rows.map(fromRow);
  }

  /** Sets the status; with `from`, only when the stored one is among them. False when nothing matched. */
  async setStatus(name: string, status: SnapshotStatus, from?: SnapshotStatus[]): Promise<boolean> {
    let query = this.db.updateTable('snapshots').set({ status }).where('name', '=', name);
    if (from) query = query.where('status', 'in', from);
    return Number((await query.executeTakeFirst()).numUpdatedRows) === 1;
  }

  async delete(name: string): Promise<void> {
    await this.db.deleteFrom('snapshots').where('name', '=', name).execute();
  }
}

function toRow(r: SnapshotRecord): SnapshotTable {
  return {
    name: r.name,
    status: r.status,
    sandbox: r.sandbox,
    sandbox_uuid: r.sandboxUuid,
    image_tag: r.imageTag,
    backend: r.backend,
    base_image: r.baseImage,
    vcpus: r.vcpus,
    memory_mb: r.memoryMb,
    profile: r.profile,
    env: JSON.stringify(r.env),
    created_at: r.createdAt,
  };
}

function fromRow(row: Selectable<SnapshotTable>): SnapshotRecord {
  return {
    name: row.name,
    status: row.status as SnapshotStatus,
    sandbox: row.sandbox,
    sandboxUuid: row.sandbox_uuid,
    imageTag: row.image_tag,
    backend: row.backend,
    baseImage: row.base_image,
    vcpus: row.vcpus,
    memoryMb: row.memory_mb,
    profile: row.profile as Profile,
    env: JSON.parse(row.env) as Record<string, string>,
    createdAt: row.created_at,
  };
}
