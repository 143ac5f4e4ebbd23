import { conflict } from '../../errors.js';
import type { SandboxRecord, SandboxStatus } from '../../state/sandbox-repository.js';

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
