import type { AuditEntry, AuditRepository } from '../../state/audit-repository.js';
import { isoNow, type Clock } from '../support/clock.js';
import type { EventBus, EventResource, EventType } from './event-bus.js';
import type { ServiceContext } from '../context.js';
import type { AuditApi, AuditEvent, AuditSubject } from './api.js';

export type { AuditEvent, AuditSubject } from './api.js';

/** The audit entries that are also published on the event bus, and as which event type. */
const EVENT_OF: Partial<Record<AuditEvent, EventType>> = {
  sandbox_created: 'sandbox.created',
  sandbox_started: 'sandbox.started',
  command_executed: 'sandbox.exec.completed',
  sandbox_stopped: 'sandbox.stopped',
  sandbox_resized: 'sandbox.resized',
  sandbox_extended: 'sandbox.extended',
  sandbox_archived: 'sandbox.archived',
  sandbox_recovered: 'sandbox.recovered',
  sandbox_expired: 'sandbox.expired',
  sandbox_removed: 'sandbox.deleted',
  snapshot_created: 'snapshot.created',
  snapshot_restored: 'snapshot.restored',
  snapshot_deleted: 'snapshot.deleted',
};


/**
 * The one place where what happened to a sandbox is recorded: the audit log, and the event
 * bus for the lifecycle entries. Every path (HTTP, MCP, runs, lifecycle loops) records
 * through here, so events and metrics follow from every one of them.
 */
export class AuditService implements AuditApi {
  private readonly repo: AuditRepository;
  private readonly clock: Clock;
  private readonly events: EventBus;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'clock' | 'bus'>) {
    this.repo = ctx.repos.audit;
    this.clock = ctx.clock;
    this.events = ctx.bus;
  }

  async record(event: AuditEvent, sandbox: AuditSubject, details: object = {}): Promise<void> {
    const timestamp = isoNow(this.clock);
    await this.repo.append({ timestamp, event, sandbox: sandbox.name, sandbox_uuid: sandbox.uuid, details });
    const type = EVENT_OF[event];
    if (!type || !this.events) return;
    this.events.publish({
      type,
      timestamp,
      sandbox: sandbox.name,
      sandbox_uuid: sandbox.uuid,
      labels: sandbox.labels ?? {},
      metadata: type === 'sandbox.exec.completed' ? execMetadata(details as ExecDetails) : { ...details },
    });
  }

  /**
   * Publishes an event about something that is not a sandbox (a schedule, an object, ...):
   * `sandbox` and `sandbox_uuid` are empty and `resource` says what it is about.
   */
  resourceEvent(type: EventType, resource: EventResource, metadata: Record<string, unknown> = {}): void {
    this.events.publish({ type, timestamp: isoNow(this.clock), sandbox: '', sandbox_uuid: '', resource, labels: {}, metadata });
  }

  async entries(sandboxUuid: string): Promise<AuditEntry[]> {
    return this.repo.forSandbox(sandboxUuid);
  }
}

interface ExecDetails {
  command: string[];
  exit_code: number;
  duration_ms: number;
  timed_out: boolean;
  sudo?: boolean;
}

/** The command as one shell-quoted string, and `success` (exit 0, no timeout). */
function execMetadata(d: ExecDetails): Record<string, unknown> {
  return {
    command: truncate(d.command.map(shellQuote).join(' ')),
    duration_ms: d.duration_ms,
    success: d.exit_code === 0 && !d.timed_out,
    exit_code: d.exit_code,
    timed_out: d.timed_out,
    ...(d.sudo ? { sudo: true } : {}),
  };
}

/** Events stay small whatever the command: at most this many characters of it. */
const MAX_COMMAND_CHARS = 4096;
const truncate = (text: string) => (text.length > MAX_COMMAND_CHARS ? `${text.slice(0, MAX_COMMAND_CHARS - 1)}…` : text);

const shellQuote = (arg: string): string => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`);
