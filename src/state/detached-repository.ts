import type { Kysely } from 'kysely';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, DetachedCommandTable } from './schema.js';

/**
 * A detached command as stored: which process (`process_id`, the backend's id of it within its
 * sandbox) of which sandbox a service id stands for. Field names are the column names.
 */
export interface DetachedRecord extends Decoded<DetachedCommandTable, { command: string[] }> {}

const codec = new RowCodec<DetachedCommandTable, DetachedRecord>(['command']);

/** Detached commands in the state store, so that their ids outlive a server restart. */
export class DetachedRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(record: DetachedRecord): Promise<void> {
    await this.db.insertInto('detached_commands').values(codec.toRow(record)).execute();
  }

  /** One sandbox's detached command by id; undefined when the id is another sandbox's. */
  async byId(sandboxUuid: string, id: string): Promise<DetachedRecord | undefined> {
    const row = await this.db
      .selectFrom('detached_commands')
      .selectAll()
      .where('id', '=', id)
      .where('sandbox_uuid', '=', sandboxUuid)
      .executeTakeFirst();
    return row && codec.fromRow(row);
  }

  /** A sandbox's detached commands, oldest first. */
  async forSandbox(sandboxUuid: string): Promise<DetachedRecord[]> {
    const rows = await this.db.selectFrom('detached_commands').selectAll().where('sandbox_uuid', '=', sandboxUuid).orderBy('id').execute();
    return rows.map((row) => codec.fromRow(row));
  }
}
