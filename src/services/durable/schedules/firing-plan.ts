import { v7 as uuidv7 } from 'uuid';
import { present } from '../../../errors.js';
import type { ClaimUpdate, RunRecord, RunStatus, ScheduleRecord } from '../../../state/schedule-repository.js';
import { dueOccurrences, MISFIRE_GRACE_MS, type CronCalculator } from './cron.js';
import { nextStatus } from './schedule-status.js';

/** What one claim of a due schedule writes, and the run whose target it fires (if any). */
export interface FiringPlan {
  update: ClaimUpdate;
  /** Every run the claim inserts, oldest first: a missed record, then the fired or skipped run. */
  runs: RunRecord[];
  /** The run to invoke the target for once the claim committed; undefined when nothing fires. */
  fire: RunRecord | undefined;
}

/** A new run row. Ended kinds (skipped, missed) are finished when recorded. */
export function newRun(fields: { schedule_id: string; scheduled_for: Date; now: Date; status: RunStatus; missed_count: number; manual?: boolean }): RunRecord {
  const ended = fields.status !== 'running';
  return {
    id: uuidv7(),
    schedule_id: fields.schedule_id,
    scheduled_for: fields.scheduled_for.toISOString(),
    started_at: fields.now.toISOString(),
    finished_at: ended ? fields.now.toISOString() : null,
    status: fields.status,
    missed_count: fields.missed_count,
    duration_ms: ended ? 0 : null,
    result: null,
    error: null,
    orchestration_id: null,
    attempt: 1,
    manual: fields.manual ? 1 : 0,
  };
}

/**
 * The claim of a due schedule at `now`, worked out without touching the store (the repository
 * commits it with a conditional UPDATE). `running`: a run of the schedule is in flight.
 *
 * Due occurrences are split into late ones (more than 60 s before `now`: downtime, or a tick
 * that came that late) and on-time ones. `misfire: fire_once` fires the latest due occurrence
 * once, with `missed_count` = the others folded into it; `misfire: skip` fires the latest
 * on-time occurrence (folding the other on-time ones) and records the late ones as one `missed`
 * run. Under `overlap: skip` a firing while a run is in flight is recorded `skipped` instead.
 * The next occurrence is the first after `now` (after `end_at` there is none: completed); a
 * one-shot has none.
 */
export function planFiring(schedule: ScheduleRecord, now: Date, running: boolean, calculator: CronCalculator | undefined): FiringPlan {
  const due = new Date(present(schedule.next_fire_at, `the next_fire_at of due schedule '${schedule.name}'`));
  const at = (scheduled_for: Date, status: RunStatus, missed_count: number) =>
    newRun({ schedule_id: schedule.id, scheduled_for, now, status, missed_count });
  const runs: RunRecord[] = [];
  let fireAt: { scheduled_for: Date; missed_count: number } | undefined;
  let next: Date | null = null;
  let status = schedule.status;

  if (!calculator || schedule.cron === null) {
    // A one-shot: its one occurrence is fire_at.
    const late = now.getTime() - due.getTime() > MISFIRE_GRACE_MS;
    if (late && schedule.misfire === 'skip') {
      runs.push(at(due, 'missed', 1));
      status = nextStatus(status, 'one_shot_missed') ?? status;
    } else {
      fireAt = { scheduled_for: due, missed_count: 0 };
    }
  } else {
    const occurrences = dueOccurrences(calculator, due, now);
    const { late, onTime } = occurrences;
    if (schedule.misfire === 'fire_once') {
      const latest = onTime.latest ?? late.latest;
      if (latest) fireAt = { scheduled_for: latest, missed_count: late.count + onTime.count - 1 };
    } else {
      if (late.latest) runs.push(at(late.latest, 'missed', late.count));
      if (onTime.latest) fireAt = { scheduled_for: onTime.latest, missed_count: onTime.count - 1 };
    }
    next = occurrences.next;
    if (next && schedule.end_at && next.getTime() >= Date.parse(schedule.end_at)) next = null;
    if (!next) status = nextStatus(status, 'end_reached') ?? status;
  }

  let fire: RunRecord | undefined;
  if (fireAt) {
    const skipped = running && schedule.overlap === 'skip';
    const run = at(fireAt.scheduled_for, skipped ? 'skipped' : 'running', fireAt.missed_count);
    runs.push(run);
    if (!skipped) fire = run;
  }
  const last = runs.at(-1);
  const update: ClaimUpdate = {
    next_fire_at: next ? next.toISOString() : null,
    status,
    fire_count_increment: fire ? 1 : 0,
    updated_at: now.toISOString(),
    ...(fire ? { last_fired_at: now.toISOString() } : {}),
    ...(last ? { last_run_status: last.status } : {}),
  };
  return { update, runs, fire };
}
