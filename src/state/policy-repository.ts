import type { Kysely } from 'kysely';
import type { Database, PermissionTable, PolicyAuditTable } from './schema.js';
import type { Statements } from './store.js';

export type PolicyAuditRow = Omit<PolicyAuditTable, 'id'>;
export type PermissionRow = PermissionTable;

/** Decisions kept in the audit ring; older rows are dropped as new ones arrive. */
export const AUDIT_RING_SIZE = 10_000;

/** The policy audit ring and the persisted (`always`) permission grants. */
export class PolicyRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly statements: Statements,
  ) {}

  /**
   * Appends a decision and drops what falls out of the ring, in one transaction of prepared
   * statements: it runs on the request path of every denied (or, when asked, allowed) request.
   */
  appendAudit(row: PolicyAuditRow): void {
    this.statements.transaction(() => {
      const { lastInsertRowid } = this.statements
        .get('insert into "policy_audit" ("timestamp", "principal", "action", "resource", "decision", "rule", "reason", "mode") values (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.timestamp, row.principal, row.action, row.resource, row.decision, row.rule, row.reason, row.mode);
      this.statements.get('delete from "policy_audit" where "id" <= ?').run(Number(lastInsertRowid) - AUDIT_RING_SIZE);
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

  /** Every persisted grant, oldest first; synchronous, read once when the service is built. */
  permissionsNow(): PermissionRow[] {
    return this.statements.get('select * from "permissions" order by "granted_at", "id"').all() as PermissionRow[];
  }

  /** Deletes a grant (synchronous: expired grants are dropped on the request path). */
  deletePermission(id: string): void {
    this.statements.get('delete from "permissions" where "id" = ?').run(id);
  }

  /** Counts a use of a grant (synchronous: on the request path). */
  countUse(id: string): void {
    this.statements.get('update "permissions" set "uses" = "uses" + 1 where "id" = ?').run(id);
  }
}
