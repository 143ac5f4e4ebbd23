/**
 * The worker pool of activities: at most `concurrency` attempts run at once, over every
 * instance, each as an independent promise, so a ten-minute activity delays nobody but the
 * attempts queued behind a full pool (never another instance's decisions). A freed slot goes to
 * the waiting attempt of the instance that has the fewest attempts running, the earliest first
 * among equals: one instance's wide `map` takes the slots nobody else asks for, and an instance
 * that waits gets the next slot however many items the map still holds. An attempt can be
 * cancelled while it waits (dropped) or while it runs (its AbortSignal fires: the run's container
 * is discarded, the exec's process tree killed).
 */
import type { ActivityCommand } from './interpreter/index.js';

export interface ActivityJob {
  instance: string;
  command: ActivityCommand;
}

/** What the pool does with a job once a slot is free; the signal fires on cancel and close. */
export type JobWork = (job: ActivityJob, signal: AbortSignal) => Promise<void>;

const keyOf = (instance: string, step: string, attempt: number) => `${instance}\u0000${step}\u0000${attempt}`;

export class ActivityPool {
  private readonly queue: ActivityJob[] = [];
  private readonly running = new Map<string, AbortController>();
  /** Attempts running per instance, for the fair pick; an instance with none has no entry. */
  private readonly perInstance = new Map<string, number>();
  private readonly settled = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly concurrency: number,
    private readonly work: JobWork,
  ) {}

  /** Attempts running now. */
  get inflight(): number {
    return this.running.size;
  }

  /** Queues an attempt unless it is queued or running already (a restart re-arm racing a decision). */
  submit(job: ActivityJob): void {
    if (this.closed) return;
    const key = keyOf(job.instance, job.command.step, job.command.attempt);
    if (this.running.has(key) || this.queue.some((queued) => keyOf(queued.instance, queued.command.step, queued.command.attempt) === key)) return;
    this.queue.push(job);
    this.pump();
  }

  /** Drops the attempt if it waits; aborts it if it runs. */
  cancel(instance: string, step: string, attempt: number): void {
    const key = keyOf(instance, step, attempt);
    const index = this.queue.findIndex((job) => keyOf(job.instance, job.command.step, job.command.attempt) === key);
    if (index >= 0) this.queue.splice(index, 1);
    this.running.get(key)?.abort();
  }

  /** Drops and aborts every attempt of an instance (it finished or was deleted). */
  cancelInstance(instance: string): void {
    const kept = this.queue.filter((job) => job.instance !== instance);
    this.queue.splice(0, this.queue.length, ...kept);
    const prefix = `${instance}\u0000`;
    for (const [key, controller] of this.running) if (key.startsWith(prefix)) controller.abort();
  }

  /**
   * Stops taking work, drops the queue and aborts what runs, and waits for the running jobs to
   * return. Their task rows stay as they are: the next start finds them (scheduled: run;
   * running: interrupted), exactly as after a crash.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    for (const controller of this.running.values()) controller.abort();
    await Promise.allSettled([...this.settled]);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private pump(): void {
    while (!this.closed && this.running.size < this.concurrency && this.queue.length > 0) {
      const [job] = this.queue.splice(this.fairest(), 1);
      if (!job) return;
      const key = keyOf(job.instance, job.command.step, job.command.attempt);
      const controller = new AbortController();
      this.running.set(key, controller);
      this.perInstance.set(job.instance, (this.perInstance.get(job.instance) ?? 0) + 1);
      const done: Promise<void> = this.work(job, controller.signal)
        .catch(() => undefined)
        .finally(() => {
          this.running.delete(key);
          const left = (this.perInstance.get(job.instance) ?? 1) - 1;
          if (left > 0) this.perInstance.set(job.instance, left);
          else this.perInstance.delete(job.instance);
          this.settled.delete(done);
          this.pump();
        });
      this.settled.add(done);
    }
  }

  /** The queue index of the next attempt: fewest running of its instance, earliest among equals. */
  private fairest(): number {
    let best = 0;
    let bestRunning = Infinity;
    for (const [index, job] of this.queue.entries()) {
      if (bestRunning === 0) break;
      const running = this.perInstance.get(job.instance) ?? 0;
      if (running < bestRunning) [best, bestRunning] = [index, running];
    }
    return best;
  }
}
