import type { RunPoolApi } from './api.js';
import { DEMAND_WINDOW_MS, KeyedPool, type KeyEntry, type PoolContext } from './keyed-pool.js';
import { poolKeyId, type PoolKey, type PooledInstance, type TakenInstance } from './pool-types.js';

/** Instances kept beyond the most that were in use at once lately: a run never waits for a reset. */
const SPARE = 2;
/** Most instances of one key. */
const MAX_KEY_SIZE = 64;
/** Runs one instance serves before it is replaced (a bound on whatever a reset cannot see). */
export const MAX_RUNS_PER_INSTANCE = 1000;

interface RunInstance extends PooledInstance {
  runs: number;
}

interface KeyRuns extends KeyEntry<RunInstance> {
  /** Taken for a run, or being reset after one. */
  inUse: number;
  /** [time, instances in use] at each take of the last DEMAND_WINDOW_MS. */
  samples: Array<[number, number]>;
  /** Instances being reset after a run. */
  resetting: number;
  /** Takers waiting for the next instance a reset gives back; never more than are resetting. */
  waiters: Array<(instance: RunInstance | undefined) => void>;
}

/**
 * The instances behind fast runs where the backend can reset one (`reuse`): each serves run
 * after run, and between two runs the backend brings it back to the state it was made in and
 * checks that state; an instance whose reset fails is destroyed, never used again. A key keeps
 * its configured size (`pool.size`, `pool.sizes`) plus as many as were in use at once in the
 * last minute and two spare, so that a run does not wait for the previous one's reset; past
 * the configured size only while the pools' memory budget has room. Idle instances beyond that
 * go back as the demand ages out of the window. Instances carry role `pool`, so that recovery
 * reaps those a crash left behind. The per-key bookkeeping is KeyedPool's; a key's ready
 * instances are its idle ones.
 */
export class RunPool extends KeyedPool<RunInstance, KeyRuns> implements RunPoolApi {
  constructor(ctx: PoolContext) {
    super(ctx, { instance: 'run instance', namePrefix: 'runner', makeFailed: 'run instances not made' });
  }

  /** Whether fast runs use this pool: the backend can reset an instance. */
  override get enabled(): boolean {
    return this.backend.capabilities.reuse !== undefined;
  }

  /**
   * An idle instance of `key`, else one made now for the caller; `release` gives it back. A key
   * met for the first time gets its pool once its image is known to exist (pool-keys.ts); until
   * then its runs get instances made for them and destroyed after.
   */
  take(key: PoolKey): TakenInstance {
    const runs = this.entries.get(poolKeyId(key));
    if (!runs) {
      this.admit(key);
      const name = this.newName();
      return { name, warm: false, instance: this.make(key, name) };
    }
    const now = this.clock().getTime();
    runs.lastTaken = now;
    runs.inUse++;
    runs.samples.push([now, runs.inUse]);
    // The most recently used first: its pages are still in the cache.
    const idle = runs.ready.pop();
    this.fill();
    if (idle) return { name: idle.name, warm: true, instance: Promise.resolve(idle) };
    if (runs.waiters.length < runs.resetting) {
      // A reset under way gives an instance back in tens of milliseconds, sooner than one made
      // now (hundreds, seconds on a busy engine); if that reset fails, one is made after all.
      const reset = new Promise<RunInstance | undefined>((resolve) => runs.waiters.push(resolve));
      return { warm: true, instance: reset.then((instance) => instance ?? this.makeFor(runs, this.newName())) };
    }
    const name = this.newName();
    return { name, warm: false, instance: this.makeFor(runs, name) };
  }

  /** An instance made for a taker who found none idle (counted in use already). */
  private makeFor(runs: KeyRuns, name: string): Promise<RunInstance> {
    return this.make(runs.key, name).catch((err: unknown) => {
      runs.inUse--;
      throw err;
    });
  }

  /** After a run: the instance is reset in the background and then idle again, or destroyed. */
  release(instance: PooledInstance): void {
    const runs = this.entries.get(poolKeyId(instance.key));
    const used = instance as RunInstance;
    used.runs = (used.runs ?? 0) + 1;
    if (!runs || this.closed || used.runs >= MAX_RUNS_PER_INSTANCE) {
      if (runs) runs.inUse--;
      this.discard(instance);
      return;
    }
    const reuse = this.backend.capabilities.reuse;
    if (!reuse) {
      runs.inUse--;
      this.discard(instance);
      return;
    }
    runs.resetting++;
    this.track(
      reuse.reset(instance.state.id).then(
        () => {
          runs.resetting--;
          // The target while this instance still counts as held (as the budget counts it).
          const target = this.targetOf(runs);
          runs.inUse--;
          const waiter = this.current(runs) ? runs.waiters.shift() : undefined;
          if (waiter) waiter(used);
          else if (!this.current(runs) || this.heldOf(runs) >= target) this.discard(instance);
          else runs.ready.push(used);
          this.afterReset(runs);
        },
        (err: Error) => {
          runs.resetting--;
          runs.inUse--;
          this.logger.warn({ err, container: instance.state.id }, 'run instance not reset; destroying it');
          this.discard(instance);
          this.afterReset(runs);
        },
      ),
    );
  }

  /** After a reset: takers beyond the resets still under way have an instance made for them. */
  private afterReset(runs: KeyRuns): void {
    while (runs.waiters.length > runs.resetting) runs.waiters.pop()?.(undefined);
    this.fill();
  }

  /** A taken instance that turned out gone or broken: destroyed, never reset. */
  drop(instance: PooledInstance): void {
    const runs = this.entries.get(poolKeyId(instance.key));
    if (runs) runs.inUse--;
    this.discard(instance);
  }

  protected newEntry(base: KeyEntry<RunInstance>): KeyRuns {
    return { ...base, inUse: 0, samples: [], resetting: 0, waiters: [] };
  }

  protected override inUse(runs: KeyRuns): number {
    return runs.inUse;
  }

  /** The configured size, or the most instances in use at once in the last DEMAND_WINDOW_MS plus SPARE. */
  protected wanted(runs: KeyRuns): number {
    const since = this.clock().getTime() - DEMAND_WINDOW_MS;
    while ((runs.samples[0]?.[0] ?? Infinity) <= since) runs.samples.shift();
    const peak = runs.samples.reduce((most, [, inUse]) => Math.max(most, inUse), 0);
    return Math.min(Math.max(MAX_KEY_SIZE, runs.size), Math.max(runs.size, peak > 0 ? peak + SPARE : 0));
  }

  /** The least recently used idle instances beyond the target go (the most recent are taken first). */
  protected shed(runs: KeyRuns): void {
    const surplus = this.heldOf(runs) - this.targetOf(runs);
    for (const instance of runs.ready.splice(0, Math.max(0, Math.min(surplus, runs.ready.length)))) this.discard(instance);
  }

  protected make(key: PoolKey, name: string): Promise<RunInstance> {
    return this.containers.make(key, name, true, { runs: 0 });
  }
}
