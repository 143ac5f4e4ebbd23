import type { AuditEntry, AuditRepository } from '../state/audit-repository.js';
import { isoNow, type Clock } from './clock.js';

/** Audit event names written by the service. */
export type AuditEvent =
  | 'sandbox_created'
  | 'sandbox_started'
  | 'sandbox_stopped'
  | 'sandbox_removed'
  | 'sandbox_updated'
  | 'sandbox_recovered_from_crash'
  | 'sandbox_archived'
  | 'sandbox_recovered'
  | 'sandbox_resized'
  | 'sandbox_extended'
  | 'sandbox_expired'
  | 'snapshot_created'
  | 'snapshot_restored'
  | 'snapshot_deleted'
  | 'command_executed'
  | 'file_written'
  | 'file_read'
  | 'file_deleted';

/** Writes and reads the audit log of sandboxes. */
export class AuditService {
  constructor(
    private readonly repo: AuditRepository,
    private readonly clock: Clock,
  ) {}

  async record(event: AuditEvent, sandbox: { name: string; uuid: string }, details: object = {}): Promise<void> {
    await this.repo.append({ timestamp: isoNow(this.clock), event, sandbox: sandbox.name, sandboxUuid: sandbox.uuid, details });
  }

  async entries(sandboxUuid: string): Promise<AuditEntry[]> {
    return this.repo.forSandbox(sandboxUuid);
  }
}
