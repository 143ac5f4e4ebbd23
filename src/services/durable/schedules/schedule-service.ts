import { v7 as uuidv7 } from 'uuid';
import { badRequest, conflict, notFound, present, ServiceError } from '../../../errors.js';
import {
  schedule as scheduleSchema,
  scheduleRun,
  type CreateScheduleInput,
  type ListRunsQuery,
  type ListSchedulesQuery,
  type PatchScheduleInput,
  type ScheduleBody,
  type ScheduleRunBody,
} from '../../../schemas/schedule-schemas.js';
import { view } from '../../../schemas/view.js';
import type { RunRecord, ScheduleRecord, ScheduleRepository } from '../../../state/schedule-repository.js';
import type { Repositories, ServiceContext } from '../../context.js';
import type { Clock } from '../../support/clock.js';
import type { ObjectCaller } from '../object-caller.js';
import type { OrchestrationStarter } from '../orchestration-starter.js';
import { cronCalculator, firstAfter, isTimeZone, MISFIRE_GRACE_MS } from './cron.js';
import { newRun } from './firing-plan.js';
import { ScheduleFiring, type ScheduleMetrics } from './schedule-firing.js';
import { requireTransition } from './schedule-status.js';
import { checkReferences, checkTarget, type TargetPorts } from './schedule-targets.js';

export interface ScheduleServiceInput extends Pick<ServiceContext, 'clock' | 'logger' | 'timers' | 'audit' | 'sandboxes' | 'exec'> {
  repos: Pick<Repositories, 'schedules'>;
  runs: TargetPorts['runs'];
  objects: ObjectCaller;
  orchestrations: OrchestrationStarter;
  metrics: ScheduleMetrics;
  /** Target runs at once; default 4. */
  concurrency?: number;
}

/** When a schedule fires: the fields that decide its occurrences. */
interface Timing {
  cron: string | null;
  fire_at: string | null;
  timezone: string;
  end_at: string | null;
}

/** Schedules a server keeps at most. */
export const MAX_SCHEDULES = 10_000;

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 timestamp as RFC 3339 UTC text with milliseconds; BAD_REQUEST naming `field` otherwise. */
export function parseTimestamp(value: string, field: string): string {
  const match = RFC3339.exec(value);
  // No match gives NaN fields, which every comparison below refuses.
  const [year = NaN, month = NaN, day = NaN, hour = NaN, minute = NaN, second = NaN] = (match?.slice(1, 7) ?? []).map(Number);
  const valid =
    match !== null &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= new Date(Date.UTC(year, month, 0)).getUTCDate() &&
    hour < 24 &&
    minute < 60 &&
    second < 60 &&
    !Number.isNaN(Date.parse(value.replace(' ', 'T')));
  if (!valid) throw badRequest(`${field}: '${value.slice(0, 64)}' is not an RFC 3339 timestamp such as 2026-01-01T12:00:00Z`);
  return new Date(Date.parse(value.replace(' ', 'T'))).toISOString();
}

/**
 * Schedules (docs/decisions.md, "Schedules"): cron or one-shot firings of an object method, an
 * orchestration start, an exec in a sandbox or a /run, fired by the DurableTimers driver through
 * `firing` (at most once across restarts), with pause/resume, trigger-now and run history.
 */
export class ScheduleService {
  /** The timer source; registered with the driver by the wiring. */
  readonly firing: ScheduleFiring;
  private readonly repo: ScheduleRepository;
  private readonly clock: Clock;
  private readonly timers: ServiceContext['timers'];
  private readonly ports: TargetPorts;

  constructor(input: ScheduleServiceInput) {
    this.repo = input.repos.schedules;
    this.clock = input.clock;
    this.timers = input.timers;
    this.ports = { sandboxes: input.sandboxes, exec: input.exec, runs: input.runs, objects: input.objects, orchestrations: input.orchestrations };
    this.firing = new ScheduleFiring({
      repo: this.repo,
      clock: input.clock,
      logger: input.logger,
      audit: input.audit,
      ports: this.ports,
      metrics: input.metrics,
      ...(input.concurrency ? { concurrency: input.concurrency } : {}),
    });
  }

  /** POST /schedules. */
  async create(input: CreateScheduleInput): Promise<ScheduleBody> {
    const now = this.clock();
    if ((input.cron === undefined) === (input.fire_at === undefined)) {
      throw badRequest(input.cron === undefined ? 'cron: give cron or fire_at' : 'cron: give cron or fire_at, not both');
    }
    const timing: Timing = {
      cron: input.cron ?? null,
      fire_at: input.fire_at === undefined ? null : this.futureFireAt(input.fire_at, now),
      timezone: input.timezone ?? 'UTC',
      end_at: input.end_at === undefined ? null : parseTimestamp(input.end_at, 'end_at'),
    };
    if (timing.end_at && Date.parse(timing.end_at) <= now.getTime()) throw badRequest('end_at: is in the past');
    const first = this.firstOccurrence(timing, now);
    const fields = { method: input.method, args: input.args ?? {}, ...targetsOf(input) };
    checkTarget(fields, this.ports);
    if (await this.repo.byName(input.name)) throw conflict(`schedule '${input.name}' exists already`);
    if ((await this.repo.count()) >= MAX_SCHEDULES) throw new ServiceError('LIMIT_REACHED', `at most ${MAX_SCHEDULES} schedules; delete some first`);
    await checkReferences(fields, this.ports);
    const status = input.status ?? 'active';
    const stamp = now.toISOString();
    const record: ScheduleRecord = {
      id: uuidv7(),
      name: input.name,
      ...timing,
      ...fields,
      status,
      overlap: input.overlap ?? 'skip',
      misfire: input.misfire ?? 'fire_once',
      next_fire_at: status === 'active' ? first : null,
      last_fired_at: null,
      last_run_status: null,
      fire_count: 0,
      trigger_count: 0,
      created_at: stamp,
      updated_at: stamp,
    };
    try {
      await this.repo.insert(record);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw conflict(`schedule '${input.name}' exists already`);
      throw err;
    }
    await this.timers.poke();
    return this.view(record);
  }

  /** GET /schedules. */
  async list(query: ListSchedulesQuery): Promise<ScheduleBody[]> {
    const records = await this.repo.list({ ...query, limit: query.limit });
    return records.map((record) => this.view(record));
  }

  /** GET /schedules/{id}: by id, else by name. */
  async get(idOrName: string): Promise<ScheduleBody> {
    return this.view(await this.require(idOrName));
  }

  /** The stored schedule with this id, else this name; NOT_FOUND otherwise. */
  async require(idOrName: string): Promise<ScheduleRecord> {
    const record = (await this.repo.byId(idOrName)) ?? (await this.repo.byName(idOrName));
    if (!record) throw notFound(`schedule '${idOrName}' not found`);
    return record;
  }

  /**
   * PATCH /schedules/{id}: pause, resume (from now: paused time is not caught up), or new timing,
   * args or policies. next_fire_at is recomputed when the timing changes or the schedule resumes.
   */
  async update(idOrName: string, patch: PatchScheduleInput): Promise<ScheduleBody> {
    const now = this.clock();
    const current = await this.require(idOrName);
    if (current.status === 'completed' || current.status === 'failed') {
      throw conflict(`schedule '${current.name}' is ${current.status}: it fires no more; create a new schedule`);
    }
    if (patch.cron !== undefined && patch.fire_at !== undefined) throw badRequest('cron: give cron or fire_at, not both');
    const timing: Timing = { cron: current.cron, fire_at: current.fire_at, timezone: patch.timezone ?? current.timezone, end_at: current.end_at };
    if (patch.cron !== undefined) Object.assign(timing, { cron: patch.cron, fire_at: null });
    if (patch.fire_at !== undefined) Object.assign(timing, { cron: null, fire_at: this.futureFireAt(patch.fire_at, now) });
    if (patch.end_at !== undefined) {
      timing.end_at = patch.end_at === null ? null : parseTimestamp(patch.end_at, 'end_at');
      if (timing.end_at && Date.parse(timing.end_at) <= now.getTime()) throw badRequest('end_at: is in the past');
    }
    const first = this.firstOccurrence(timing, now);
    const args = patch.args ?? current.args;
    if (patch.args) checkTarget({ ...current, args }, this.ports);
    const status = patch.status ? requireTransition(current.name, current.status, patch.status === 'paused' ? 'pause' : 'resume') : current.status;
    const retimed = patch.cron !== undefined || patch.fire_at !== undefined || patch.timezone !== undefined || patch.end_at !== undefined;
    const resumed = current.status === 'paused' && status === 'active';
    // A one-shot that fired already is not armed again, unless it is given a new fire_at.
    const spent = timing.cron === null && patch.fire_at === undefined && current.fire_count > 0;
    let next = current.next_fire_at;
    if (status === 'paused' || spent) next = null;
    else if (retimed || resumed) next = first;
    const fields: Partial<ScheduleRecord> = {
      ...timing,
      args,
      status,
      overlap: patch.overlap ?? current.overlap,
      misfire: patch.misfire ?? current.misfire,
      next_fire_at: next,
      updated_at: now.toISOString(),
    };
    await this.repo.update(current.id, fields);
    await this.timers.poke();
    return this.view({ ...current, ...fields });
  }

  /** DELETE /schedules/{id}: a run in flight finishes; the runs go with the schedule. */
  async remove(idOrName: string): Promise<string> {
    const record = await this.require(idOrName);
    await this.repo.delete(record.id);
    return `schedule '${record.name}' deleted`;
  }

  /**
   * POST /schedules/{id}/trigger: fires now and waits for the target (up to its own timeout),
   * whatever the status; next_fire_at does not move, and it counts in trigger_count, not fire_count.
   */
  async trigger(idOrName: string): Promise<ScheduleRunBody> {
    const record = await this.require(idOrName);
    const now = this.clock();
    const run = newRun({ schedule_id: record.id, scheduled_for: now, now, status: 'running', missed_count: 0, manual: true });
    await this.repo.insertRun(run);
    await this.firing.runNow(record, run);
    return this.runView((await this.repo.runById(run.id)) ?? run);
  }

  /** GET /schedules/{id}/runs: newest first. */
  async runs(idOrName: string, query: ListRunsQuery): Promise<ScheduleRunBody[]> {
    const record = await this.require(idOrName);
    const runs = await this.repo.runs(record.id, { ...(query.status ? { status: query.status } : {}), limit: query.limit });
    return runs.map((run) => this.runView(run));
  }

  /** At start, before the driver: runs in flight at the last stop (see ScheduleFiring.recover). */
  recover(): Promise<{ interrupted: number; retried: number }> {
    return this.firing.recover();
  }

  /** Resolves once every fired run handed off so far has ended. */
  settled(): Promise<void> {
    return this.firing.settled();
  }

  /** Stops starting runs and gives those in flight a moment to be recorded (the owner closes the driver first). */
  close(): Promise<void> {
    return this.firing.close();
  }

  /** A one-shot time, not more than the grace in the past. */
  private futureFireAt(value: string, now: Date): string {
    const fireAt = parseTimestamp(value, 'fire_at');
    if (now.getTime() - Date.parse(fireAt) > MISFIRE_GRACE_MS) throw badRequest('fire_at: is in the past');
    return fireAt;
  }

  /** The first occurrence after `now` (a one-shot's is fire_at); BAD_REQUEST for a timing that never fires. */
  private firstOccurrence(timing: Timing, now: Date): string {
    if (!isTimeZone(timing.timezone)) throw badRequest(`timezone: '${timing.timezone}' is not an IANA time zone (such as UTC or Europe/Berlin)`);
    if (timing.cron === null) {
      if (timing.end_at) throw badRequest('end_at: applies to cron schedules only');
      return present(timing.fire_at, 'the fire_at of a schedule without cron');
    }
    const first = firstAfter(cronCalculator(timing.cron, timing.timezone), now);
    if (timing.end_at && first.getTime() >= Date.parse(timing.end_at)) throw badRequest(`end_at: the cron's first occurrence (${first.toISOString()}) is not before it`);
    return first.toISOString();
  }

  private view(record: ScheduleRecord): ScheduleBody {
    return view(scheduleSchema, record);
  }

  private runView(run: RunRecord): ScheduleRunBody {
    return { ...view(scheduleRun, run), result: run.result ?? null };
  }
}

/** The target fields of a create body, null where absent. */
function targetsOf(input: CreateScheduleInput) {
  return {
    target_class: input.target_class ?? null,
    target_object_id: input.target_object_id ?? null,
    target_orchestration: input.target_orchestration ?? null,
    target_sandbox: input.target_sandbox ?? null,
  };
}
