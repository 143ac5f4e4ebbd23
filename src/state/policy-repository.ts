import type { Kysely } from 'kysely';
import type { Database, PermissionTable, PolicyAuditTable } from './schema.js';
import type { Sql } from './sql.js';

export type PolicyAuditRow = Omit<PolicyAuditTable, 'id'>;
export type PermissionRow = PermissionTable;

/** Decisions kept in the audit ring; older rows are dropped as new ones arrive. */
export const AUDIT_RING_SIZE = 10_000;

/** The policy audit ring and the persisted (`always`) permission grants. */
export class PolicyRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly sql: Sql,
  ) {}

  /**
   * Appends a decision and drops what falls out of the ring, in one transaction of prepared
   * statements: it runs for every denied (or, when asked, allowed) request.
   */
  async appendAudit(row: PolicyAuditRow): Promise<void> {
    await this.sql.transaction(async (tx) => {
      const inserted = await tx.first<{ id: number }>(
        'insert into "policy_audit" ("timestamp", "principal", "action", "resource", "decision", "rule", "reason", "mode") values (?, ?, ?, ?, ?, ?, ?, ?) returning "id"',
        [row.timestamp, row.principal, row.action, row.resource, row.decision, row.rule, row.reason, row.mode],
      );
      await tx.run('delete from "policy_audit" where "id" <= ?', [Number(inserted?.id) - AUDIT_RING_SIZE]);
    });
  }

  /** The newest decisions first, optionally of one decision and one principal (an empty one means any). */
  async audit(filter: { limit: number; decision?: 'allow' | 'deny'; principal?: string }): Promise<PolicyAuditRow[]> {
    let query = this.db.selectFrom('policy_audit').select(['timestamp', 'principal', 'action', 'resource', 'decision', 'rule', 'reason', 'mode']);
    if (filter.decision) query = query.where('decision', '=', filter.decision);
    if (filter.principal) query = query.where('principal', '=', filter.principal);
    return query.orderBy('id', 'desc').limit(filter.limit).execute();
  }

  async insertPermission(row: PermissionRow): Promise<void> {
    await this.db.insertInto('permissions').values(row).execute();
  }

  /** Every persisted grant, oldest first: read once when the service is built. */
  permissions(): Promise<PermissionRow[]> {
    return this.sql.all('select * from "permissions" order by "granted_at", "id"');
  }

  /** Deletes a grant. */
  async deletePermission(id: string): Promise<void> {
    await this.sql.run('delete from "permissions" where "id" = ?', [id]);
  }

  /** Counts a use of a grant. */
  async countUse(id: string): Promise<void> {
    await this.sql.run('update "permissions" set "uses" = "uses" + 1 where "id" = ?', [id]);
  }
}
