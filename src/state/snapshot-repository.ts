import type { Kysely } from 'kysely';
import type { Profile } from '../domain/profiles.js';
import type { VolumeMount } from '../domain/volumes.js';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, SnapshotTable } from './schema.js';

/** `creating` and `deleting` are in-flight states that recovery resolves. */
export type SnapshotStatus = 'creating' | 'ready' | 'deleting';

/**
 * A snapshot as stored: the source (name and uuid; the sandbox may be gone since), the image
 * and the settings a restore gets. Field names are the column names, as on the wire.
 */
export interface SnapshotRecord
  extends Decoded<
    SnapshotTable,
    { status: SnapshotStatus; profile: Profile; env: Record<string, string>; labels: Record<string, string>; volumes: VolumeMount[] | null }
  > {}

const codec = new RowCodec<SnapshotTable, SnapshotRecord>(['env', 'labels', 'volumes']);

/** Snapshots in the state store. */
export class SnapshotRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a new snapshot; false when the name is taken. */
  async insert(record: SnapshotRecord): Promise<boolean> {
    const result = await this.db
      .insertInto('snapshots')
      .values(codec.toRow(record))
      .onConflict((oc) => oc.column('name').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  async byName(name: string): Promise<SnapshotRecord | undefined> {
    const row = await this.db.selectFrom('snapshots').selectAll().where('name', '=', name).executeTakeFirst();
    return row && codec.fromRow(row);
  }

  /** All snapshots, oldest first. */
  async all(): Promise<SnapshotRecord[]> {
    const rows = await this.db.selectFrom('snapshots').selectAll().orderBy('created_at').orderBy('name').execute();
    return rows.map((row) => codec.fromRow(row));
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
