import type { Kysely, Selectable } from 'kysely';
import type { Database, DetachedCommandTable } from './schema.js';

/** A detached command as stored: which process of which sandbox a service id stands for. */
export interface DetachedRecord {
  id: string;
  sandboxUuid: string;
  /** The backend's id of the process within its sandbox. */
  processId: string;
  pid: number;
  command: string[];
  startedAt: string;
}

/** Detached commands in the state store, so that their ids outlive a server restart. */
export class DetachedRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(record: DetachedRecord): Promise<void> {
    await this.db
      .insertInto('detached_commands')
      .values({
        id: record.id,
        sandbox_uuid: record.sandboxUuid,
        process_id: record.processId,
        pid: record.pid,
        command: JSON.stringify(record.command),
        started_at: record.startedAt,
      })
      .execute();
  }

  /** One sandbox's detached command by id; undefined when the id is another sandbox's. */
  async byId(sandboxUuid: string, id: string): Promise<DetachedRecord | undefined> {
    const row = await this.db
      .selectFrom('detached_commands')
      .selectAll()
      .where('id', '=', id)
      .where('sandbox_uuid', '=', sandboxUuid)
      .executeTakeFirst();
    return row && fromRow(row);
  }

  /** A sandbox's detached commands, oldest first. */
  async forSandbox(sandboxUuid: string): Promise<DetachedRecord[]> {
    const rows = await this.db.selectFrom('detached_commands').selectAll().where('sandbox_uuid', '=', sandboxUuid).orderBy('id').execute();
    return rows.map(fromRow);
  }
}

function fromRow(row: Selectable<DetachedCommandTable>): DetachedRecord {
  return {
    id: row.id,
    sandboxUuid: row.sandbox_uuid,
    processId: row.process_id,
    pid: row.pid,
    command: JSON.parse(row.command) as string[],
    startedAt: row.started_at,
  };
}
