import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Sql } from './sql.js';

export interface AuditEntry {
  timestamp: string;
  event: string;
  sandbox: string;
  [detail: string]: unknown;
}

/** The audit log: append-only entries per sandbox. */
export class AuditRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly sql: Sql,
  ) {}

  /** Every exec and file operation appends one entry: a prepared statement. */
  async append(entry: { timestamp: string; event: string; sandbox: string; sandbox_uuid?: string; details: object }): Promise<void> {
    await this.sql.run('insert into "audit_log" ("timestamp", "event", "sandbox", "sandbox_uuid", "details") values (?, ?, ?, ?, ?)', [
      entry.timestamp,
      entry.event,
      entry.sandbox,
      entry.sandbox_uuid ?? null,
      JSON.stringify(entry.details),
    ]);
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
