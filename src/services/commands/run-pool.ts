import { randomBytes } from 'node:crypto';
import type { Backend } from '../../backends/backend.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Clock } from '../support/clock.js';
import { DEFAULT_LIMITS, DEFAULT_PROFILE } from '../sandboxes/sandbox-defaults.js';
import type { ServiceContext } from '../context.js';
import type { PoolKey, PooledInstance, TakenInstance } from './warm-pool.js';
import { DEMAND_WINDOW_MS, POOL_IDLE_MS } from './warm-pool.js';
import { PoolContainers } from './pool-containers.js';
import { PoolKeys } from './pool-keys.js';

/** Most instances made at once: the engine keeps serving requests meanwhile. */
const MAX_MAKING = 2;
/** After a failed make, a key waits this long before it makes ahead of demand again. */
const MAKE_RETRY_MS = 30_000;
/** Instances kept beyond the most that were in use at once lately: a run never waits for a reset. */
const SPARE = 2;
/** Most instances of one key. */
const MAX_KEY_SIZE = 64;
/** Runs one instance serves before it is replaced (a bound on whatever a reset cannot see). */
export const MAX_RUNS_PER_INSTANCE = 1000;

interface RunInstance extends PooledInstance {
  runs: number;
}

interface KeyRuns {
  key: PoolKey;
  /** Configured size: instances kept ready whatever the demand. */
  size: number;
  idle: RunInstance[];
  /** Taken for a run, or being reset after one. */
  inUse: number;
  making: number;
  /** [time, instances in use] at each take of the last DEMAND_WINDOW_MS. */
  samples: Array<[number, number]>;
  lastTaken: number;
  pinned: boolean;
  retryAt: number;
}

/**
 * The instances behind fast runs where the backend can reset one (`reuse`): each serves run
 * after run, and between two runs the backend brings it back to the state it was made in and
 * checks that state; an instance whose reset fails is destroyed, never used again. A key keeps
 * its configured size (`pool.size`, `pool.sizes`) plus as many as were in use at once in the
 * last minute and two spare, so that a run does not wait for the previous one's reset; past
 * the configured size only while the pools' memory budget has room. Idle instances beyond that
 * go back as the demand ages out of the window. Instances carry role `pool`, so that recovery
 * reaps those a crash left behind.
 */
export class RunPool {
  private readonly keys = new Map<string, KeyRuns>();
  /** Which keys have a pool: only images that exist, at most MAX_ON_DEMAND_KEYS on demand. */
  private readonly admission: PoolKeys<KeyRuns>;
  /** Its containers: made, destroyed, held until destroyed. */
  private readonly containers: PoolContainers;
  private making = 0;
  private closed = false;

  private readonly backend: Backend;
  private readonly settings: ServiceContext['settings'];
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(private readonly ctx: Pick<ServiceContext, 'backend' | 'settings' | 'clock' | 'logger' | 'poolBudget'>) {
    this.backend = ctx.backend;
    this.settings = ctx.settings;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    ctx.poolBudget.track(() => this.keptCount() * DEFAULT_LIMITS.memory_mb);
    this.admission = new PoolKeys(this.keys, this.backend, this.logger);
    this.containers = new PoolContainers(this.backend, this.logger, 'run instance');
  }

  /** Whether fast runs use this pool: the backend can reset an instance. */
  get enabled(): boolean {
    return this.backend.capabilities.reuse !== undefined;
  }

  /** Starts making the default image's instances and every configured key's. */
  warm(): void {
    if (!this.enabled) return;
    this.keyOf({ image: this.settings.defaultImage, profile: DEFAULT_PROFILE }).pinned = true;
    for (const key of this.settings.poolSizes ?? []) this.keyOf(key).pinned = true;
    this.fill();
  }

  /** Idle instances, over every key. */
  get size(): number {
    let total = 0;
    for (const runs of this.keys.values()) total += runs.idle.length;
    return total;
  }

  /**
   * An idle instance of `key`, else one made now for the caller; `release` gives it back. A key
   * met for the first time gets its pool once its image is known to exist (pool-keys.ts); until
   * then its runs get instances made for them and destroyed after.
   */
  take(key: PoolKey): TakenInstance {
    const runs = this.keys.get(keyId(key));
    if (!runs) {
      this.admit(key);
      const name = runName();
      return { name, warm: false, instance: this.make(key, name) };
    }
    const now = this.clock().getTime();
    runs.lastTaken = now;
    runs.inUse++;
    runs.samples.push([now, runs.inUse]);
    // The most recently used first: its pages are still in the cache.
    const idle = runs.idle.pop();
    this.fill();
    if (idle) return { name: idle.name, warm: true, instance: Promise.resolve(idle) };
    const name = runName();
    const made = this.make(key, name).catch((err: unknown) => {
      runs.inUse--;
      throw err;
    });
    return { name, warm: false, instance: made };
  }

  /** How many instances `key` aims at now (idle, in use and being made). */
  target(key: PoolKey): number {
    const runs = this.keys.get(keyId(key));
    return runs ? this.targetOf(runs) : 0;
  }

  /** Whether the instance is this pool's (idle, in use or being made). */
  holds(uuid: string): boolean {
    return this.containers.holds(uuid);
  }

  /** After a run: the instance is reset in the background and then idle again, or destroyed. */
  release(instance: PooledInstance): void {
    const runs = this.keys.get(keyId(instance.key));
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
    this.track(
      reuse.reset(instance.state.id).then(
        () => {
          // The target while this instance still counts as held (as the budget counts it).
          const target = this.targetOf(runs);
          runs.inUse--;
          if (this.closed || this.keys.get(keyId(runs.key)) !== runs || runs.idle.length + runs.inUse + runs.making >= target) {
            this.discard(instance);
          } else {
            runs.idle.push(used);
          }
          this.fill();
        },
        (err: Error) => {
          runs.inUse--;
          this.logger.warn({ err, container: instance.state.id }, 'run instance not reset; destroying it');
          this.discard(instance);
          this.fill();
        },
      ),
    );
  }

  /** A taken instance that turned out gone or broken: destroyed, never reset. */
  drop(instance: PooledInstance): void {
    const runs = this.keys.get(keyId(instance.key));
    if (runs) runs.inUse--;
    this.discard(instance);
  }

  /** Gives back idle instances beyond each key's demand, and keys no one took from for POOL_IDLE_MS. */
  evictIdle(): void {
    const before = this.clock().getTime() - POOL_IDLE_MS;
    for (const [id, runs] of this.keys) {
      const surplus = runs.idle.length + runs.inUse + runs.making - this.targetOf(runs);
      for (const instance of runs.idle.splice(0, Math.max(0, Math.min(surplus, runs.idle.length)))) this.discard(instance);
      if (runs.pinned || runs.lastTaken > before || runs.inUse > 0) continue;
      this.keys.delete(id);
      for (const instance of runs.idle.splice(0)) this.discard(instance);
    }
  }

  /** Lets go of an image's pools (the image is being removed): idle instances are destroyed, those in use when released. */
  async forgetImage(image: string): Promise<void> {
    for (const [id, runs] of this.keys) {
      if (runs.key.image !== image) continue;
      this.keys.delete(id);
      for (const instance of runs.idle.splice(0)) this.discard(instance);
    }
    await this.settled();
  }

  /** Resolves once no instance is being made, reset or removed. */
  async settled(): Promise<void> {
    await this.containers.settled();
  }

  /** Stops making instances and removes every idle one; those in use go when released. */
  async close(): Promise<void> {
    this.closed = true;
    for (const runs of this.keys.values()) for (const instance of runs.idle.splice(0)) this.discard(instance);
    await this.settled();
  }

  /** On-demand keys (not pinned). */
  get onDemandKeys(): number {
    return this.admission.onDemand;
  }

  private admit(key: PoolKey): void {
    if (this.closed || !this.enabled) return;
    const admitted = this.admission.admit(
      keyId(key),
      key,
      () => {
        if (this.closed) return;
        this.keyOf(key);
        this.fill();
      },
      (_id, runs) => {
        for (const instance of runs.idle.splice(0)) this.discard(instance);
      },
    );
    if (admitted) this.track(admitted);
  }

  /** Instances idle, in use or being made (those being destroyed no longer count). */
  private keptCount(): number {
    let count = 0;
    for (const runs of this.keys.values()) count += runs.idle.length + runs.inUse + runs.making;
    return count;
  }

  private keyOf(key: PoolKey): KeyRuns {
    const id = keyId(key);
    let runs = this.keys.get(id);
    if (!runs) {
      const size = (this.settings.poolSizes ?? []).find((entry) => keyId(entry) === id)?.size ?? this.settings.poolSize ?? 0;
      runs = { key, size, idle: [], inUse: 0, making: 0, samples: [], lastTaken: this.clock().getTime(), pinned: false, retryAt: 0 };
      this.keys.set(id, runs);
    }
    return runs;
  }

  /**
   * The configured size, or the most instances in use at once in the last DEMAND_WINDOW_MS plus
   * SPARE; past the size only while the memory budget has room for what is not yet made.
   */
  private targetOf(runs: KeyRuns): number {
    const since = this.clock().getTime() - DEMAND_WINDOW_MS;
    while ((runs.samples[0]?.[0] ?? Infinity) <= since) runs.samples.shift();
    const peak = runs.samples.reduce((most, [, inUse]) => Math.max(most, inUse), 0);
    const wanted = Math.min(Math.max(MAX_KEY_SIZE, runs.size), Math.max(runs.size, peak > 0 ? peak + SPARE : 0));
    const held = runs.idle.length + runs.inUse + runs.making;
    if (wanted <= Math.max(held, runs.size)) return wanted;
    const budget = this.ctx.poolBudget;
    const room = Math.floor((budget.limitMb - budget.usedMb()) / DEFAULT_LIMITS.memory_mb);
    return Math.max(runs.size, Math.min(wanted, held + room));
  }

  /** Makes instances for the keys below their target, at most MAX_MAKING at once. */
  private fill(): void {
    if (this.closed || !this.enabled) return;
    const now = this.clock().getTime();
    for (const runs of this.keys.values()) {
      // Size 0 makes nothing ahead of demand; the instances its runs made are still reused.
      while (runs.size > 0 && this.making < MAX_MAKING && runs.retryAt <= now && runs.idle.length + runs.inUse + runs.making < this.targetOf(runs)) {
        runs.making++;
        this.making++;
        const made = this.make(runs.key, runName()).then(
          (instance) => {
            if (this.closed || this.keys.get(keyId(runs.key)) !== runs) this.discard(instance);
            else runs.idle.push(instance);
          },
          (err: Error) => {
            runs.retryAt = this.clock().getTime() + MAKE_RETRY_MS;
            this.logger.warn({ err, image: runs.key.image, profile: runs.key.profile }, `run instances not made; retrying in ${MAKE_RETRY_MS / 1000} s`);
          },
        );
        this.track(
          made.finally(() => {
            runs.making--;
            this.making--;
            this.fill();
          }),
        );
      }
    }
  }

  private make(key: PoolKey, name: string): Promise<RunInstance> {
    return this.containers.make(key, name, true, { runs: 0 });
  }

  private discard(instance: PooledInstance): void {
    this.containers.discard(instance);
  }

  private track(work: Promise<unknown>): void {
    this.containers.track(work);
  }
}

const runName = () => `runner-${randomBytes(6).toString('hex')}`;

const keyId = (key: PoolKey): string => `${key.image}@${key.profile}`;
