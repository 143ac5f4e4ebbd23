import type { Counter, Histogram } from 'prom-client';
import { present } from '../../../errors.js';
import type { RunEnd, RunRecord, ScheduleRecord, ScheduleRepository, ScheduleStatus } from '../../../state/schedule-repository.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { AuditApi } from '../../events/api.js';
import type { Clock } from '../../support/clock.js';
import { ConcurrencyLimit } from '../../support/concurrency-limit.js';
import type { TimerSource } from '../durable-timers.js';
import { cronCalculator, type CronCalculator } from './cron.js';
import { planFiring, type FiringPlan } from './firing-plan.js';
import { nextStatus, oneShotTrigger } from './schedule-status.js';
import { invokeTarget, targetKind, type TargetPorts } from './schedule-targets.js';

/** The schedule figures of the metrics registry. */
export interface ScheduleMetrics {
  scheduleRuns: Pick<Counter<'status'>, 'inc'>;
  scheduleLag: Pick<Histogram, 'observe'>;
}

export interface ScheduleFiringInput {
  repo: ScheduleRepository;
  clock: Clock;
  logger: Logger;
  audit: AuditApi;
  ports: TargetPorts;
  metrics: ScheduleMetrics;
  /** Target runs at once (all schedules); default 4. */
  concurrency?: number;
}

/** Due schedules claimed per tick; more are claimed by the next tick, which the driver runs at once. */
const CLAIMS_PER_TICK = 100;
/** Claimed runs waiting for a slot at most; a claim past it records its run failed at once. */
const MAX_WAITING = 256;

const INTERRUPTED = 'the server stopped during the run; it is not fired again (at most once)';

/**
 * The firing half of schedules: the timer source the DurableTimers driver ticks, the claim of
 * due schedules, the hand-off of their targets to a bounded set of runs (so a tick returns at
 * once), the record of each run's end, and recovery at start.
 */
export class ScheduleFiring implements TimerSource {
  readonly name = 'schedules';
  private readonly repo: ScheduleRepository;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly audit: AuditApi;
  private readonly ports: TargetPorts;
  private readonly metrics: ScheduleMetrics;
  private readonly limit: ConcurrencyLimit;
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;

  constructor(input: ScheduleFiringInput) {
    this.repo = input.repo;
    this.clock = input.clock;
    this.logger = input.logger;
    this.audit = input.audit;
    this.ports = input.ports;
    this.metrics = input.metrics;
    this.limit = new ConcurrencyLimit(input.concurrency ?? 4);
  }

  /** The earliest next_fire_at of the active schedules, from the store. */
  async nextDue(): Promise<Date | null> {
    const due = await this.repo.nextDue();
    return due === null ? null : new Date(due);
  }

  /**
   * Claims every schedule due at `now` (its claim and runs commit before anything runs) and
   * hands the fired targets off; it does not wait for them.
   */
  async tick(now: Date): Promise<void> {
    if (this.closed) return;
    // Never before the driver's idea of now; the clock's own reading makes started_at exact.
    const at = new Date(Math.max(now.getTime(), this.clock().getTime()));
    for (const schedule of await this.repo.due(at.toISOString(), CLAIMS_PER_TICK)) await this.claim(schedule, at);
  }

  /**
   * Claims one due schedule. A schedule that cannot be planned (a stored cron croner refuses
   * now) or claimed is logged and paused, so that it never stops the others from firing.
   */
  private async claim(schedule: ScheduleRecord, now: Date): Promise<void> {
    let plan: FiringPlan | undefined;
    try {
      const calculator: CronCalculator | undefined = schedule.cron === null ? undefined : cronCalculator(schedule.cron, schedule.timezone);
      const due = present(schedule.next_fire_at, `the next_fire_at of due schedule '${schedule.name}'`);
      const inserted = await this.repo.claim(schedule.id, due, (running) => (plan = planFiring(schedule, now, running, calculator)));
      if (inserted.length === 0) return;
    } catch (err) {
      this.logger.error({ err, schedule: schedule.name }, 'schedule could not be claimed; pausing it');
      await this.repo.pause(schedule.id, now.toISOString());
      return;
    }
    // The repository plans (calls back) whenever it inserts.
    const { runs, fire } = present(plan, `the firing plan of schedule '${schedule.name}'`);
    for (const run of runs) if (run.status !== 'running') this.metrics.scheduleRuns.inc({ status: run.status });
    if (!fire) return;
    this.metrics.scheduleLag.observe(Math.max(0, now.getTime() - Date.parse(fire.scheduled_for)) / 1000);
    this.dispatch(schedule, fire);
  }

  /**
   * Runs a claimed run's target when a slot is free, then records its end. Too many waiting:
   * the run is recorded failed at once (the claim stands; it is not fired later).
   */
  dispatch(schedule: ScheduleRecord, run: RunRecord): void {
    if (this.inFlight.size >= MAX_WAITING) {
      const end = this.end(run, 'failed', null, `more than ${MAX_WAITING} schedule runs were waiting; this one was not run`);
      void this.finish(schedule, run, end).catch((err: unknown) => this.logger.error({ err, schedule: schedule.name, run: run.id }, 'schedule run failed to record'));
      return;
    }
    const work = (async () => {
      const release = await this.limit.acquire();
      try {
        if (this.closed) return;
        const outcome = await invokeTarget(schedule, run, this.ports);
        await this.finish(schedule, run, { ...this.end(run, outcome.ok ? 'succeeded' : 'failed', outcome.result, outcome.error), orchestration_id: outcome.orchestration_id ?? null });
      } finally {
        release();
      }
    })()
      .catch((err: unknown) => this.logger.error({ err, schedule: schedule.name, run: run.id }, 'schedule run failed to record'))
      .finally(() => this.inFlight.delete(work));
    this.inFlight.add(work);
  }

  /** Runs a manual trigger's target now (not bounded: its client waits for it) and records its end. */
  async runNow(schedule: ScheduleRecord, run: RunRecord): Promise<void> {
    const outcome = await invokeTarget(schedule, run, this.ports);
    await this.finish(schedule, run, { ...this.end(run, outcome.ok ? 'succeeded' : 'failed', outcome.result, outcome.error), orchestration_id: outcome.orchestration_id ?? null });
  }

  /**
   * At start, before the driver: a run the stopped server had in flight is `interrupted` and not
   * fired again (at most once), except an object-method run or an orchestration start on its
   * first attempt, which is retried once with the same idempotency key (the object keeps one
   * storage effect per key; the orchestration service starts one instance per key).
   * Returns how many runs were interrupted and retried.
   */
  async recover(): Promise<{ interrupted: number; retried: number }> {
    const counts = { interrupted: 0, retried: 0 };
    for (const run of await this.repo.runningRuns()) {
      const schedule = await this.repo.byId(run.schedule_id);
      if (!schedule) continue;
      const kind = targetKind(schedule);
      if (!run.manual && run.attempt === 1 && (kind === 'object' || kind === 'orchestration')) {
        await this.repo.retryRun(run.id);
        this.dispatch(schedule, { ...run, attempt: 2 });
        counts.retried++;
      } else {
        await this.finish(schedule, run, this.end(run, 'interrupted', null, INTERRUPTED));
        counts.interrupted++;
      }
    }
    if (counts.interrupted + counts.retried > 0) this.logger.warn(counts, 'schedule runs in flight at the last stop');
    return counts;
  }

  /** Resolves once every run handed off so far has ended (tests and shutdown). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /**
   * No new runs start; runs in flight get `graceMs` to end and be recorded. One still running
   * after it is found `running` at the next start and recorded interrupted.
   */
  async close(graceMs = 2000): Promise<void> {
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([this.settled(), grace]);
    clearTimeout(timer);
  }

  private end(run: RunRecord, status: RunEnd['status'], result: unknown, error: string | null): RunEnd {
    const finished = this.clock();
    return { status, finished_at: finished.toISOString(), duration_ms: Math.max(0, finished.getTime() - Date.parse(run.started_at)), result, error };
  }

  /** Records a run's end (and a one-shot's status with it), counts it, and publishes a failure. */
  private async finish(schedule: ScheduleRecord, run: RunRecord, end: RunEnd): Promise<void> {
    const decide = (current: ScheduleStatus): ScheduleStatus | undefined => {
      if (schedule.cron !== null) return undefined;
      const trigger = oneShotTrigger(end.status);
      return trigger ? nextStatus(current, trigger) : undefined;
    };
    if (!(await this.repo.finishRun(run, end, decide))) return;
    this.metrics.scheduleRuns.inc({ status: end.status });
    if (end.status === 'failed' || end.status === 'interrupted') {
      this.audit.resourceEvent(
        'schedule.run.failed',
        { kind: 'schedule', id: schedule.id, name: schedule.name },
        { run_id: run.id, scheduled_for: run.scheduled_for, status: end.status, error: end.error },
      );
    }
  }
}
