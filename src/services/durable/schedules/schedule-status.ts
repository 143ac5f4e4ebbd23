import { conflict } from '../../../errors.js';
import type { RunStatus, ScheduleStatus } from '../../../state/schedule-repository.js';

/** What moves a schedule from one status to another. */
export type ScheduleTrigger =
  | 'pause'
  | 'resume'
  /** A one-shot's run succeeded. */
  | 'one_shot_succeeded'
  /** A one-shot's time was missed under `misfire: skip`. */
  | 'one_shot_missed'
  /** A one-shot's run failed (or was interrupted). */
  | 'one_shot_failed'
  /** A cron schedule has no occurrence left before its end_at. */
  | 'end_reached';

/** One allowed transition. Creation (active or paused) and DELETE (from any status) are not transitions of a stored status. */
export interface ScheduleTransition {
  from: ScheduleStatus;
  on: ScheduleTrigger;
  to: ScheduleStatus;
}

/**
 * Every transition of a stored schedule; anything else is refused (409). Pausing a paused
 * schedule or resuming an active one changes nothing and is allowed. Cron schedules never
 * become failed by themselves: a failing target is recorded per run and the schedule keeps firing.
 */
export const SCHEDULE_TRANSITIONS: readonly ScheduleTransition[] = [
  { from: 'active', on: 'pause', to: 'paused' },
  { from: 'paused', on: 'pause', to: 'paused' },
  { from: 'paused', on: 'resume', to: 'active' },
  { from: 'active', on: 'resume', to: 'active' },
  { from: 'active', on: 'one_shot_succeeded', to: 'completed' },
  { from: 'active', on: 'one_shot_missed', to: 'completed' },
  { from: 'active', on: 'one_shot_failed', to: 'failed' },
  { from: 'active', on: 'end_reached', to: 'completed' },
  // A one-shot paused while its run was in flight still ends with it.
  { from: 'paused', on: 'one_shot_succeeded', to: 'completed' },
  { from: 'paused', on: 'one_shot_failed', to: 'failed' },
];

/** Where `on` takes a schedule in status `from`, or undefined when it may not. */
export function nextStatus(from: ScheduleStatus, on: ScheduleTrigger): ScheduleStatus | undefined {
  return SCHEDULE_TRANSITIONS.find((t) => t.from === from && t.on === on)?.to;
}

/** Where `on` takes schedule `name`; CONFLICT when the transition is not in the table. */
export function requireTransition(name: string, from: ScheduleStatus, on: ScheduleTrigger): ScheduleStatus {
  const to = nextStatus(from, on);
  if (!to) throw conflict(`schedule '${name}' is ${from}: no transition on ${on}; create a new schedule`);
  return to;
}

/** The trigger a one-shot's finished run sets off. */
export function oneShotTrigger(run: Exclude<RunStatus, 'running'>): ScheduleTrigger | undefined {
  if (run === 'succeeded') return 'one_shot_succeeded';
  if (run === 'missed') return 'one_shot_missed';
  if (run === 'failed' || run === 'interrupted') return 'one_shot_failed';
  return undefined;
}
