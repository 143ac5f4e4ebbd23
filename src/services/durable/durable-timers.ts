import type { Logger } from '../../telemetry/logger.js';
import type { Clock } from '../support/clock.js';

/**
 * Longest wait between two reads of the sources' due times. Waiting no longer than this keeps
 * every timeout far below setTimeout's ~24.8-day limit and bounds how late work runs after the
 * wall clock jumps forward or a write forgot to poke.
 */
export const MAX_WAIT_MS = 30_000;
/** First wait before a failed source is tried again; it doubles per failure up to MAX_WAIT_MS. */
export const FIRST_RETRY_MS = 1_000;

/**
 * A subsystem with work due at times it keeps in the store: schedule firings, object alarms,
 * orchestration timers, retry back-offs. The driver asks each source when its next work is due
 * and calls `tick` once that time has come; the source reads and claims its due rows itself,
 * so its state survives a restart and the driver keeps none of it.
 */
export interface TimerSource {
  /** Names the source in logs and in the failure metric; unique per driver. */
  readonly name: string;
  /** The earliest due time of the source's pending work, read from the store; null when it has none. */
  nextDue(): Date | null | Promise<Date | null>;
  /**
   * Does the work due at or before `now`. Long work (a command, an activity) is handed off to
   * the source's own queue: the next tick of every source waits for this one to return.
   */
  tick(now: Date): void | Promise<void>;
}

export interface DurableTimersInput {
  clock: Clock;
  logger: Logger;
  /** Called once per failure of a source's `nextDue` or `tick`, with the source's name (metrics). */
  onFailure?: (source: string) => void;
}

/** The armed wake-up: when the driver next reads its sources, by its clock. */
export interface Wake {
  at: Date;
  delayMs: number;
}

/** Failures in a row of one source, and the time before which it is not asked again. */
interface Backoff {
  failures: number;
  until: number;
}

/**
 * One in-process driver for everything due at a time. It keeps a single timeout, set to the
 * earliest `nextDue()` of its sources and never longer than MAX_WAIT_MS; `poke()` re-reads the
 * sources after a write, and every wake-up re-reads them, so a restart or a clock jump loses
 * nothing. Ticks never overlap: a tick asked for while one runs starts after it. A source that
 * throws is logged and counted, tried again after a growing back-off, and never stops the driver.
 * `tick()` is public so that tests move a manual clock and tick instead of sleeping.
 */
export class DurableTimers {
  private readonly sources = new Map<string, TimerSource>();
  private readonly backoff = new Map<string, Backoff>();
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly onFailure: (source: string) => void;
  private timer: NodeJS.Timeout | undefined;
  private armed: Wake | undefined;
  /** Bumped by every arming and by close: an arming that finds it changed drops its result. */
  private generation = 0;
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private started = false;
  private closed = false;
  private failureCount = 0;

  constructor({ clock, logger, onFailure = () => undefined }: DurableTimersInput) {
    this.clock = clock;
    this.logger = logger;
    this.onFailure = onFailure;
  }

  /** When the driver next wakes; undefined before `start()`, after `close()` and while it re-arms. */
  get nextWake(): Wake | undefined {
    return this.armed;
  }

  /** Failures of sources (their `nextDue` or `tick`) since the driver was made. */
  get failures(): number {
    return this.failureCount;
  }

  /** Adds a source and re-reads the due times; the returned function removes it again. */
  register(source: TimerSource): () => void {
    if (this.sources.has(source.name)) throw new Error(`a timer source named '${source.name}' is registered already`);
    this.sources.set(source.name, source);
    void this.poke();
    return () => {
      if (this.sources.get(source.name) !== source) return;
      this.sources.delete(source.name);
      this.backoff.delete(source.name);
    };
  }

  /**
   * Starts driving the sources: a tick at once (work that came due while the server was down),
   * then one at every wake-up. Called after recovery; the promise settles when that first tick
   * is done and never rejects.
   */
  start(): Promise<void> {
    if (this.started || this.closed) return Promise.resolve();
    this.started = true;
    return this.tick();
  }

  /**
   * Re-reads the sources' due times and re-arms the wake-up; sources call it after every write
   * that adds or moves due work. The promise settles once armed and never rejects.
   */
  poke(): Promise<void> {
    if (!this.started || this.closed) return Promise.resolve();
    // A tick under way or waiting re-arms when it ends, from due times read after this write.
    return this.queued ?? this.running ?? this.arm();
  }

  /**
   * Runs every source whose next due time has come by the clock, one source after another, then
   * re-arms. A tick asked for while one runs starts when it ends (several such asks share one
   * tick). The promise settles when that tick is done and never rejects.
   */
  tick(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.queued) return this.queued;
    if (!this.running) return this.run();
    const queued = this.running.then(() => {
      this.queued = undefined;
      return this.closed ? undefined : this.run();
    });
    this.queued = queued;
    return queued;
  }

  /** Stops the driver and waits for a tick in flight; sources are not asked again. */
  async close(): Promise<void> {
    this.closed = true;
    this.generation++;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armed = undefined;
    await (this.queued ?? this.running);
  }

  private run(): Promise<void> {
    const run = this.runSources().finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  private async runSources(): Promise<void> {
    const now = this.clock().getTime();
    for (const source of [...this.sources.values()]) {
      if (this.closed) return;
      if (this.waiting(source.name, now)) continue;
      const due = await this.guard(source, () => source.nextDue());
      if (due === undefined || due === null || due.getTime() > now) continue;
      await this.guard(source, async () => {
        await source.tick(new Date(now));
        this.backoff.delete(source.name);
      });
    }
    await this.arm();
  }

  /** Sets the one timeout to the earliest due time of all sources, MAX_WAIT_MS at most. */
  private async arm(): Promise<void> {
    if (!this.started || this.closed) return;
    const generation = ++this.generation;
    const due = await this.earliestDue();
    if (generation !== this.generation) return;
    const now = this.clock().getTime();
    const delayMs = due === null ? MAX_WAIT_MS : Math.min(Math.max(due - now, 0), MAX_WAIT_MS);
    clearTimeout(this.timer);
    this.armed = { at: new Date(now + delayMs), delayMs };
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.armed = undefined;
      void this.tick();
    }, delayMs);
    // The timers never keep the process alive on their own: the server's sockets do.
    this.timer.unref();
  }

  /** The earliest time any source wants a tick, or null. */
  private async earliestDue(): Promise<number | null> {
    let earliest: number | null = null;
    const now = this.clock().getTime();
    for (const source of [...this.sources.values()]) {
      const due = await this.dueOf(source, now);
      if (due !== null && (earliest === null || due < earliest)) earliest = due;
    }
    return earliest;
  }

  /** When a source wants its next tick: the end of its back-off while it has one, else its `nextDue()`. */
  private async dueOf(source: TimerSource, now: number): Promise<number | null> {
    const backoff = this.backoff.get(source.name);
    if (backoff && this.waiting(source.name, now)) return backoff.until;
    const next = await this.guard(source, () => source.nextDue());
    // undefined: nextDue failed just now, and its back-off says when to ask again.
    if (next === undefined) return this.backoff.get(source.name)?.until ?? null;
    return next === null ? null : next.getTime();
  }

  /**
   * Whether a failed source is still in its back-off at `now`. A back-off that reaches further
   * ahead than it could have been set means the clock went back: it is over.
   */
  private waiting(name: string, now: number): boolean {
    const backoff = this.backoff.get(name);
    return backoff !== undefined && backoff.until > now && backoff.until - now <= MAX_WAIT_MS;
  }

  /** Runs one call into a source; a failure is logged, counted and backed off, and gives undefined. */
  private async guard<T>(source: TimerSource, call: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await call();
    } catch (err) {
      const failures = (this.backoff.get(source.name)?.failures ?? 0) + 1;
      const retryMs = Math.min(FIRST_RETRY_MS * 2 ** (failures - 1), MAX_WAIT_MS);
      this.backoff.set(source.name, { failures, until: this.clock().getTime() + retryMs });
      this.failureCount++;
      this.logger.error({ err, source: source.name, failures, retry_ms: retryMs }, 'timer source failed');
      try {
        this.onFailure(source.name);
      } catch {
        // Counting must not stop the driver either.
      }
      return undefined;
    }
  }
}
