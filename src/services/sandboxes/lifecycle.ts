import { ServiceError, conflict } from '../../errors.js';
import type { SandboxRecord, SandboxStatus, TransitionedStatus } from '../../state/sandbox-repository.js';

/** Operations that act on an existing sandbox. */
export type Operation = 'start' | 'stop' | 'archive' | 'recover' | 'resize' | 'snapshot' | 'extend' | 'remove';

interface TransitionRule {
  from: readonly SandboxStatus[];
  /** Stored while the operation runs; recovery finishes or rolls it back. */
  via?: SandboxStatus;
  /** Where the operation leaves the sandbox; absent: the status does not change. */
  to?: SandboxStatus;
}

/**
 * The sandbox lifecycle as data: which operation may act from which stored status, the
 * in-flight status it holds meanwhile (what recovery finds after a crash) and where it ends.
 * Each status it writes moves through STATUS_TRANSITIONS below.
 */
export const TRANSITIONS: Record<Operation, TransitionRule> = {
  // Starting a lost sandbox makes a new container from its settings (and says so).
  start: { from: ['running', 'stopped', 'lost'], to: 'running' },
  // Stopping an archived or lost sandbox changes nothing and is not refused (stop is idempotent).
  stop: { from: ['running', 'stopped', 'archived', 'lost'], to: 'stopped' },
  archive: { from: ['running', 'stopped'], via: 'archiving', to: 'archived' },
  recover: { from: ['archived'], to: 'stopped' },
  resize: { from: ['running', 'stopped'] },
  snapshot: { from: ['running', 'stopped'] },
  extend: { from: ['running', 'stopped', 'archived', 'lost'] },
  remove: { from: ['running', 'stopped', 'archived', 'lost'], via: 'removing' },
};

/** What moves a sandbox's stored status. */
export type SandboxEvent =
  /** The container of a create runs. */
  | 'created'
  | 'start'
  | 'stop'
  /** An archive begins. */
  | 'archive'
  /** An archive is kept (its image committed, its container gone). */
  | 'archived'
  /** An archive is undone (it failed, or a crash interrupted it before the container went). */
  | 'archive_failed'
  | 'recover'
  /** A removal begins; the row is deleted once the container is gone. */
  | 'remove'
  /** The engine shows the container running or stopped (reads, a failed exec, recovery at start). */
  | 'observed'
  /** The engine no longer has the container. */
  | 'lost';

/** Events whose target the caller names: what the engine shows, or the status before an archive. */
type ChosenEvent = 'observed' | 'archive_failed';

/**
 * Every change of a stored sandbox status: each event, the statuses it may move a sandbox from
 * and where it takes it (one status, or for a chosen event the ones the caller may name).
 * Anything else is refused with IllegalTransition. A create inserts `creating` (or `running`
 * from a pool instance) and rows leave by deletion: neither is a change of a stored status.
 */
export const STATUS_TRANSITIONS: { readonly [E in SandboxEvent]: { from: readonly SandboxStatus[]; to: E extends ChosenEvent ? readonly SandboxStatus[] : SandboxStatus } } = {
  created: { from: ['creating'], to: 'running' },
  start: { from: ['running', 'stopped', 'lost'], to: 'running' },
  stop: { from: ['running', 'stopped'], to: 'stopped' },
  archive: { from: ['running', 'stopped'], to: 'archiving' },
  archived: { from: ['archiving'], to: 'archived' },
  archive_failed: { from: ['archiving'], to: ['running', 'stopped'] },
  recover: { from: ['archived'], to: 'stopped' },
  remove: { from: ['running', 'stopped', 'lost', 'archived'], to: 'removing' },
  // A lost sandbox whose container is back (recovery at start) takes the container's status.
  observed: { from: ['running', 'stopped', 'lost'], to: ['running', 'stopped'] },
  lost: { from: ['running', 'stopped'], to: 'lost' },
};

/** A status change the transitions table does not allow (CONFLICT). */
export class IllegalTransition extends ServiceError {
  constructor(
    readonly sandbox: string,
    readonly from: SandboxStatus,
    readonly on: SandboxEvent,
    readonly to?: SandboxStatus,
  ) {
    super('CONFLICT', `sandbox '${sandbox}' is ${from}: its lifecycle has no move on '${on}'${to ? ` to ${to}` : ''} from there`);
    this.name = 'IllegalTransition';
  }
}

/** Where `on` takes a sandbox in status `from` (`to` among a chosen event's targets), or undefined when the table has no such move. */
export function nextStatus(from: SandboxStatus, on: SandboxEvent, to?: SandboxStatus): SandboxStatus | undefined {
  const rule = STATUS_TRANSITIONS[on];
  if (!rule.from.includes(from)) return undefined;
  if (typeof rule.to === 'string') return to === undefined || to === rule.to ? rule.to : undefined;
  return to !== undefined && rule.to.includes(to) ? to : undefined;
}

/**
 * The status `on` moves the sandbox to, for the repository to write (the only kind of status
 * its `update` takes); IllegalTransition when the table has no such move.
 */
export function transition(record: Pick<SandboxRecord, 'name' | 'status'>, on: Exclude<SandboxEvent, ChosenEvent>): TransitionedStatus;
export function transition(record: Pick<SandboxRecord, 'name' | 'status'>, on: ChosenEvent, to: SandboxStatus): TransitionedStatus;
export function transition(record: Pick<SandboxRecord, 'name' | 'status'>, on: SandboxEvent, to?: SandboxStatus): TransitionedStatus {
  const next = nextStatus(record.status, on, to);
  if (next === undefined) throw new IllegalTransition(record.name, record.status, on, to);
  return next as TransitionedStatus;
}

/** Statuses a client sees; the other ones are in flight. */
export const VISIBLE_STATUSES: readonly SandboxStatus[] = ['running', 'stopped', 'lost', 'archiving', 'archived'];

/** The status_reason of a sandbox whose container the engine no longer has. */
export const lostReason = (container: string, noticed: string): string =>
  `its container ${container.slice(0, 12)} was removed outside sandboxd (noticed ${noticed}); its files are gone: start makes a new container from its settings`;

/** Repository of the images that keep archived sandboxes; the tag is the sandbox's uuid. */
export const ARCHIVE_REPOSITORY = 'sandboxd-archive';
/** The image tag that keeps an archived sandbox's filesystem. */
export const archiveTag = (uuid: string): string => `${ARCHIVE_REPOSITORY}:${uuid}`;

/** CONFLICT, saying why (and with a hint to recover an archived sandbox), when `operation` may not act on the sandbox now. */
export function assertTransition(record: SandboxRecord, operation: Operation): void {
  if (TRANSITIONS[operation].from.includes(record.status)) return;
  const name = record.name;
  if (record.status === 'archived') {
    throw conflict(`sandbox '${name}' is archived`, { hint: { action: 'recover', sandbox: name } });
  }
  if (operation === 'recover') throw conflict(`sandbox '${name}' is not archived (it is ${record.status}): only archived sandboxes can be recovered`);
  if (record.status === 'lost') throw conflict(`sandbox '${name}' is lost: ${record.status_reason ?? 'its container is gone'}`, { hint: { action: 'start', sandbox: name } });
  throw conflict(`sandbox '${name}' is ${record.status}: try again when that has finished`);
}

/** What a lifecycle policy does to a sandbox. */
export type PolicyAction = 'stop' | 'archive' | 'delete';

/** Why: the policy field whose threshold was passed. */
export type PolicyReason = 'auto_stop_after_seconds' | 'auto_archive_after_seconds' | 'auto_delete_after_seconds';

/** One action of a reconcile run: `reason` for people, `code` for programs. */
export interface PlannedAction {
  sandbox: string;
  action: PolicyAction;
  reason: string;
  code: PolicyReason;
}

const POLICY: readonly { action: PolicyAction; field: PolicyReason; applies: readonly SandboxStatus[]; since: 'activity' | 'archived' }[] = [
  // Delete first: it is the furthest step, and counts from the archive, not from activity.
  { action: 'delete', field: 'auto_delete_after_seconds', applies: ['archived'], since: 'archived' },
  { action: 'archive', field: 'auto_archive_after_seconds', applies: ['running', 'stopped'], since: 'activity' },
  { action: 'stop', field: 'auto_stop_after_seconds', applies: ['running'], since: 'activity' },
];

/**
 * The action a sandbox's lifecycle policy asks for at `now`, if any. Stop and archive count
 * from the last activity (else creation); delete counts from the archive and applies only to
 * archived sandboxes (docs/decisions.md, "Sandboxes").
 */
export function planAction(record: SandboxRecord, now: Date): PlannedAction | null {
  const policy = record.lifecycle;
  if (!policy) return null;
  for (const rule of POLICY) {
    const threshold = policy[rule.field];
    if (threshold === undefined || !rule.applies.includes(record.status)) continue;
    const since = rule.since === 'archived' ? record.archived_at : (record.last_activity_at ?? record.created_at);
    if (!since) continue;
    const elapsed = Math.floor((now.getTime() - Date.parse(since)) / 1000);
    if (elapsed < threshold) continue;
    const what = rule.since === 'archived' ? 'archived' : 'idle';
    return { sandbox: record.name, action: rule.action, code: rule.field, reason: `${what} for ${elapsed}s (${rule.field}: ${threshold})` };
  }
  return null;
}
