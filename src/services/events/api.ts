import type { AuditEntry } from '../../state/audit-repository.js';
import type { EventResource, EventType } from './event-bus.js';

/** Audit event names written by the service. */
export type AuditEvent =
  | 'sandbox_created'
  | 'sandbox_started'
  | 'sandbox_stopped'
  | 'sandbox_removed'
  | 'sandbox_updated'
  | 'sandbox_recovered_from_crash'
  | 'sandbox_lost'
  | 'sandbox_recreated'
  | 'sandbox_archived'
  | 'sandbox_recovered'
  | 'sandbox_resized'
  | 'sandbox_extended'
  | 'sandbox_expired'
  | 'snapshot_created'
  | 'snapshot_restored'
  | 'snapshot_deleted'
  | 'command_executed'
  | 'command_detached'
  | 'detached_killed'
  | 'terminal_opened'
  | 'file_written'
  | 'file_read'
  | 'file_deleted'
  | 'copied';

/** What an audit entry is about; labels travel with the event. */
export interface AuditSubject {
  name: string;
  uuid: string;
  labels?: Record<string, string>;
}

/**
 * What other domains use of the events domain: the audit log of sandboxes (whose lifecycle
 * entries are published as events too) and events about other resources.
 */
export interface AuditApi {
  /** Appends an entry about a sandbox; lifecycle entries are published on the bus too. */
  record(event: AuditEvent, sandbox: AuditSubject, details?: object): Promise<void>;
  /** Publishes an event about a resource that is not a sandbox (an object, a schedule, ...). */
  resourceEvent(type: EventType, resource: EventResource, metadata?: Record<string, unknown>): void;
  /** Audit entries of one sandbox, oldest first. */
  entries(sandboxUuid: string): Promise<AuditEntry[]>;
}
