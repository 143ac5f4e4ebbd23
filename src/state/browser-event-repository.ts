import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import { retryUniqueViolation } from './sql.js';

/** A browser action as the events endpoint shows it. */
export interface BrowserEvent {
  seq: number;
  type: string;
  page: string;
  ts: string;
}

/** The browser event log: append-only, numbered per sandbox. */
export class BrowserEventRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Appends an event with the next sequence number, in one statement. On SQLite nothing runs
   * beside it; on PostgreSQL two appends at once may read the same last number, and the one the
   * primary key refuses takes the next.
   */
  async append(sandboxUuid: string, event: Omit<BrowserEvent, 'seq'>): Promise<void> {
    await retryUniqueViolation(
      () => sql`
        INSERT INTO browser_events (sandbox_uuid, seq, type, page, ts)
        SELECT ${sandboxUuid}, COALESCE(MAX(seq) + 1, 0), ${event.type}, ${event.page}, ${event.ts}
        FROM browser_events WHERE sandbox_uuid = ${sandboxUuid}
      `.execute(this.db),
    );
  }

  /** Events with `seq >= offset`, oldest first, at most `limit`. */
  async list(sandboxUuid: string, offset: number, limit: number): Promise<BrowserEvent[]> {
    return this.db
      .selectFrom('browser_events')
      .select(['seq', 'type', 'page', 'ts'])
      .where('sandbox_uuid', '=', sandboxUuid)
      .where('seq', '>=', offset)
      .orderBy('seq')
      .limit(limit)
      .execute();
  }

  /** Forgets the log of a removed sandbox. */
  async deleteFor(sandboxUuid: string): Promise<void> {
    await this.db.deleteFrom('browser_events').where('sandbox_uuid', '=', sandboxUuid).execute();
  }
}
