import type { Kysely } from 'kysely';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, DetachedCommandTable } from './schema.js';

/** How a detached command ended, as the service recorded it. */
export type DetachedEnd = 'completed' | 'failed' | 'killed' | 'lost';

/**
 * A detached command as stored: which process (`process_id`, the backend's id of it within its
 * sandbox) of which sandbox a service id stands for, and, once the service observed its end, how
 * it ended (`status` null until then). Field names are the column names.
 */
export interface DetachedRecord extends Decoded<DetachedCommandTable, { command: string[]; status: DetachedEnd | null }> {}

/** One stream's kept output: `content` starts at byte `start` of everything the stream printed. */
export interface DetachedOutput {
  content: Buffer;
  start: number;
}

const codec = new RowCodec<DetachedCommandTable, DetachedRecord>(['command']);

/** Detached commands in the state store, so that their ids and results outlive a restart. */
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

  /**
   * Records how a command ended and its output, in one transaction; a command whose end is
   * already recorded keeps it (false then).
   */
  async finish(
    id: string,
    end: { status: DetachedEnd; exit_code: number | null; finished_at: string },
    outputs: Partial<Record<'stdout' | 'stderr', DetachedOutput>>,
  ): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const updated = await tx.updateTable('detached_commands').set(end).where('id', '=', id).where('status', 'is', null).executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return false;
      for (const [stream, output] of Object.entries(outputs)) {
        await tx.insertInto('detached_outputs').values({ command_id: id, stream, content: output.content, start: output.start }).execute();
      }
      return true;
    });
  }

  /** The kept output of an ended command's stream; empty when none was kept. */
  async output(id: string, stream: 'stdout' | 'stderr'): Promise<DetachedOutput> {
    const row = await this.db
      .selectFrom('detached_outputs')
      .select(['content', 'start'])
      .where('command_id', '=', id)
      .where('stream', '=', stream)
      .executeTakeFirst();
    return row ? { content: Buffer.from(row.content), start: row.start } : { content: Buffer.alloc(0), start: 0 };
  }

  /** Forgets a removed sandbox's detached commands and their output. */
  async deleteForSandbox(sandboxUuid: string): Promise<void> {
    const ids = this.db.selectFrom('detached_commands').select('id').where('sandbox_uuid', '=', sandboxUuid);
    await this.db.deleteFrom('detached_outputs').where('command_id', 'in', ids).execute();
    await this.db.deleteFrom('detached_commands').where('sandbox_uuid', '=', sandboxUuid).execute();
  }
}
