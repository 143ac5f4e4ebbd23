import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

export interface AuditEntry {
  timestamp: string;
  event: string;
  sandbox: string;
  [detail: string]: unknown;
}

/** The audit log: append-only entries per sandbox. */
export class AuditRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async append(entry: { timestamp: string; event: string; sandbox: string; sandboxUuid?: string; details: object }) {
    await this.db
      .insertInto('audit_log')
      .values({
        timestamp: entry.timestamp,
        event: entry.event,
        sandbox: entry.sandbox,
        sandbox_uuid: entry.sandboxUuid ?? null,
        details: JSON.stringify(entry.details),
      })
      .execute();
  }

  /** Entries of one sandbox (by uuid, so a recreated name starts clean), oldest first. */
  async forSandbox(sandboxUuid: string): Promise<AuditEntry[]> {
    const rows = await this.db
      .selectFrom('audit_log')
      .selectAll()
      .where('sandbox_uuid', '=', sandboxUuid)
      .orderBy('timestamp')
      .orderBy('id')
      .execute();
    return rows.map((row) => ({
      ...(JSON.parse(row.details) as object),
      timestamp: row.timestamp,
      event: row.event,
      sandbox: row.sandbox,
    }));
  }
}
