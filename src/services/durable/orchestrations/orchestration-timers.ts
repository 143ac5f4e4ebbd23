/**
 * The orchestrations' source of the DurableTimers driver: timer rows (timer steps, waits'
 * deadlines, retry back-offs), pending instances whose `start_at` came, and the retention purge
 * of finished instances. Everything is read from SQLite on every call, so a restart re-arms
 * every timer and an overdue one fires at the first tick.
 */
import type { OrchestrationRepository } from '../../../state/orchestration-repository.js';
import type { TimerSource } from '../durable-timers.js';
import type { OrchestrationService } from './orchestration-service.js';

/** Rows handled per tick; the next tick comes at once while more are due. */
const BATCH = 200;

export class OrchestrationTimers implements TimerSource {
  readonly name = 'orchestrations';

  constructor(
    private readonly repo: OrchestrationRepository,
    private readonly service: OrchestrationService,
  ) {}

  async nextDue(): Promise<Date | null> {
    const due = await this.repo.nextDue(this.service.retentionMs);
    return due === null ? null : new Date(due);
  }

  async tick(now: Date): Promise<void> {
    const at = now.toISOString();
    // The transitions are independent: one instance's timers never wait for another's.
    const [starts, timers] = [await this.repo.dueStarts(at, BATCH), await this.repo.dueTimers(at, BATCH)];
    await Promise.all([...starts.map((record) => this.service.startDue(record.id)), ...timers.map((row) => this.service.fireTimer(row.instance, row.step))]);
    await this.service.purge(now);
  }
}
