import { randomBytes } from 'node:crypto';
import type { Backend, InstanceState, Profile } from '../../backends/backend.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Clock } from '../support/clock.js';
import { DEFAULT_LIMITS, DEFAULT_PROFILE } from '../sandboxes/sandbox-defaults.js';
import type { ServiceContext } from '../context.js';
import type { PoolBudget } from './pool-budget.js';
import { PoolContainers } from './pool-containers.js';
import { PoolKeys } from './pool-keys.js';

/** What a pooled instance is interchangeable by. */
export interface PoolKey {
  image: string;
  profile: Profile;
}

export interface PoolSettings {
  /** Ready instances kept per key; 0 makes none ahead of demand. */
  size: number;
  /** Sizes of particular keys; these keys are warmed at start. */
  sizes: readonly PoolSize[];
  /** Its key (with the default profile) is warmed at start. */
  defaultImage: string;
}

export interface PoolSize extends PoolKey {
  size: number;
}

/** A pristine running instance (role `pool`), handed out once. */
export interface PooledInstance {
  name: string;
  uuid: string;
  key: PoolKey;
  state: InstanceState;
}

/** A taken instance: ready at once when it was warm, else being made for its taker. */
export interface TakenInstance {
  name: string;
  warm: boolean;
  instance: Promise<PooledInstance>;
}

/** Most pool instances made at once: the engine keeps serving requests meanwhile. */
const MAX_FILLING = 2;
/** A key no one took from for this long gives its instances back (keys warmed at start excepted). */
export const POOL_IDLE_MS = 10 * 60_000;
/** After a failed fill, a key waits this long before it tries again. */
const FILL_RETRY_MS = 30_000;
/** Takes counted for a key's demand: those of the last minute. */
export const DEMAND_WINDOW_MS = 60_000;
/**
 * A key keeps, beyond its configured size, what its takers took in this share of the window
 * (10 s of the recent rate): enough that a burst at that rate meets warm instances while the
 * refill (a few containers a second) catches up.
 */
const DEMAND_SHARE = 6;
/** Most ready instances one key grows to with demand (the most `pool.sizes` may configure). */
const MAX_DEMAND_SIZE = 64;

interface KeyPool {
  key: PoolKey;
  size: number;
  ready: PooledInstance[];
  filling: number;
  lastTaken: number;
  /** When each take of the last DEMAND_WINDOW_MS happened, oldest first. */
  takes: number[];
  /** Warmed at start and never evicted. */
  pinned: boolean;
  retryAt: number;
}

/**
 * The warm pool: pristine instances per (image, profile), started ahead of demand. Each is used
 * once (a fast run, or claimed by a new sandbox) and destroyed in the background while a
 * replacement starts. A key's pool is made on its first use once its image is known to exist
 * (the backend's ensureImage), so a name that is no image never becomes a key that retries;
 * at most MAX_ON_DEMAND_KEYS (pool-keys.ts) such keys exist, the least recently taken evicted first. Until a
 * key fills, takers get an instance made for them (a cold start). Pool instances are labelled
 * role `pool`, so that recovery reaps those a crash left behind.
 *
 * A key's pool adapts to demand: beyond its configured size (unless that is 0) it keeps as many
 * instances as were taken in 10 s at the rate of the last minute, while the pools' memory
 * budget (`pool.memory_mb`) has room; as the takes age out of the window, `evictIdle` gives
 * the extra instances back.
 */
export class WarmPool {
  private readonly pools = new Map<string, KeyPool>();
  /** Which keys have a pool: only images that exist, at most MAX_ON_DEMAND_KEYS on demand. */
  private readonly keys: PoolKeys<KeyPool>;
  /** Its containers: made, destroyed, held until destroyed or handed over to a sandbox. */
  private readonly containers: PoolContainers;
  private filling = 0;
  private closed = false;

  private readonly backend: Backend;
  private readonly settings: PoolSettings;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly budget: PoolBudget;

  constructor(ctx: Pick<ServiceContext, 'backend' | 'settings' | 'clock' | 'logger' | 'poolBudget'>) {
    this.backend = ctx.backend;
    this.settings = { size: ctx.settings.poolSize ?? 0, sizes: ctx.settings.poolSizes ?? [], defaultImage: ctx.settings.defaultImage };
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.budget = ctx.poolBudget;
    this.budget.track(() => this.heldMb());
    this.keys = new PoolKeys(this.pools, this.backend, this.logger);
    this.containers = new PoolContainers(this.backend, this.logger, 'pool instance');
  }

  /** Starts filling the default image's pool and every configured key's. */
  warm(): void {
    this.poolOf({ image: this.settings.defaultImage, profile: DEFAULT_PROFILE }).pinned = true;
    for (const key of this.settings.sizes) this.poolOf(key).pinned = true;
    this.fill();
  }

  /** Ready instances, over every key. */
  get size(): number {
    let total = 0;
    for (const pool of this.pools.values()) total += pool.ready.length;
    return total;
  }

  /** A ready instance of `key`, else one made now for the caller; either way used once. */
  take(key: PoolKey): TakenInstance {
    const ready = this.takeReady(key);
    if (ready) return { name: ready.name, warm: true, instance: Promise.resolve(ready) };
    const name = poolName();
    return { name, warm: false, instance: this.make(key, name) };
  }

  /** How many ready instances `key`'s pool aims at now: its size plus its recent demand. */
  target(key: PoolKey): number {
    const pool = this.pools.get(poolKeyId(key));
    return pool ? this.targetOf(pool) : 0;
  }

  /** A ready instance of `key`, or undefined (and the key's pool starts filling, or is made once its image is found). */
  takeReady(key: PoolKey): PooledInstance | undefined {
    const pool = this.pools.get(poolKeyId(key));
    if (!pool) {
      this.admit(key);
      return undefined;
    }
    const now = this.clock().getTime();
    pool.lastTaken = now;
    pool.takes.push(now);
    const ready = pool.ready.shift();
    this.fill();
    return ready;
  }

  /** Whether the instance is this pool's (ready, being made, taken and not yet destroyed or handed over). */
  holds(uuid: string): boolean {
    return this.containers.holds(uuid);
  }

  /** A claimed instance is a sandbox now (the store knows it): the pool lets go of it. */
  handOver(instance: PooledInstance): void {
    this.containers.release(instance.uuid);
  }

  /** Gives back a taken instance that was not used (it is still pristine). */
  restore(instance: PooledInstance): void {
    const pool = this.pools.get(poolKeyId(instance.key));
    if (this.closed || !pool) this.discard(instance);
    else pool.ready.unshift(instance);
  }

  /**
   * Destroys a used or refused instance in the background. The pool lets go of it either way: one
   * the engine failed to remove is left to the sweep (RecoveryService.sweep).
   */
  discard(instance: PooledInstance): void {
    this.containers.discard(instance);
  }

  /**
   * Gives back the instances of keys no one took from for POOL_IDLE_MS, and the ready instances
   * beyond what each key's demand asks for now.
   */
  evictIdle(): void {
    const before = this.clock().getTime() - POOL_IDLE_MS;
    for (const [id, pool] of this.pools) {
      const surplus = pool.ready.length - this.targetOf(pool);
      if (surplus > 0) for (const instance of pool.ready.splice(pool.ready.length - surplus)) this.discard(instance);
      if (pool.pinned || pool.lastTaken > before) continue;
      this.pools.delete(id);
      for (const instance of pool.ready.splice(0)) this.discard(instance);
      this.logger.info({ image: pool.key.image, profile: pool.key.profile }, 'idle pool emptied');
    }
  }

  /** Lets go of an image's pools (the image is being removed): their ready instances are destroyed. */
  async forgetImage(image: string): Promise<void> {
    for (const [id, pool] of this.pools) {
      if (pool.key.image !== image) continue;
      this.pools.delete(id);
      for (const instance of pool.ready.splice(0)) this.discard(instance);
    }
    await this.settled();
  }

  /** Resolves once no instance is being made or removed. */
  async settled(): Promise<void> {
    await this.containers.settled();
  }

  /** Stops filling and removes every instance, also those still being made. */
  async close(): Promise<void> {
    this.closed = true;
    for (const pool of this.pools.values()) for (const instance of pool.ready.splice(0)) this.discard(instance);
    await this.settled();
  }

  private poolOf(key: PoolKey): KeyPool {
    const id = poolKeyId(key);
    let pool = this.pools.get(id);
    if (!pool) {
      const size = this.settings.sizes.find((entry) => poolKeyId(entry) === id)?.size ?? this.settings.size;
      pool = { key, size, ready: [], filling: 0, lastTaken: this.clock().getTime(), takes: [], pinned: false, retryAt: 0 };
      this.pools.set(id, pool);
    }
    return pool;
  }

  /**
   * The configured size plus the takes of the last DEMAND_WINDOW_MS / DEMAND_SHARE, at the
   * window's rate; past the size only while the budget has room for what is not yet made.
   */
  private targetOf(pool: KeyPool): number {
    const since = this.clock().getTime() - DEMAND_WINDOW_MS;
    while ((pool.takes[0] ?? Infinity) <= since) pool.takes.shift();
    // Size 0 keeps nothing ahead of demand, however high the demand.
    const demand = pool.size > 0 ? Math.floor(pool.takes.length / DEMAND_SHARE) : 0;
    const wanted = Math.min(Math.max(MAX_DEMAND_SIZE, pool.size), pool.size + demand);
    const held = pool.ready.length + pool.filling;
    if (wanted <= Math.max(held, pool.size)) return wanted;
    const room = Math.floor((this.budget.limitMb - this.budget.usedMb()) / DEFAULT_LIMITS.memory_mb);
    return Math.max(pool.size, Math.min(wanted, held + room));
  }

  /** Memory held by the instances this pool keeps ready or is making. */
  private heldMb(): number {
    let count = 0;
    for (const pool of this.pools.values()) count += pool.ready.length + pool.filling;
    return count * DEFAULT_LIMITS.memory_mb;
  }

  /** Starts making instances for the keys below their target, at most MAX_FILLING at once. */
  private fill(): void {
    if (this.closed) return;
    const now = this.clock().getTime();
    for (const pool of this.pools.values()) {
      while (this.filling < MAX_FILLING && pool.retryAt <= now && pool.ready.length + pool.filling < this.targetOf(pool)) {
        this.fillOne(pool);
      }
    }
  }

  private fillOne(pool: KeyPool): void {
    pool.filling++;
    this.filling++;
    const made = this.make(pool.key, poolName()).then(
      (instance) => {
        if (this.closed || this.pools.get(poolKeyId(pool.key)) !== pool) this.discard(instance);
        else pool.ready.push(instance);
      },
      (err: Error) => {
        pool.retryAt = this.clock().getTime() + FILL_RETRY_MS;
        this.logger.warn({ err, image: pool.key.image, profile: pool.key.profile }, `pool not filled; retrying in ${FILL_RETRY_MS / 1000} s`);
      },
    );
    this.track(
      made.finally(() => {
        pool.filling--;
        this.filling--;
        this.fill();
      }),
    );
  }

  private make(key: PoolKey, name: string): Promise<PooledInstance> {
    return this.containers.make(key, name, false, {});
  }

  /** On-demand keys (not pinned). */
  get onDemandKeys(): number {
    return this.keys.onDemand;
  }

  /** Makes the pool of a key met for the first time, once its image is known to exist. */
  private admit(key: PoolKey): void {
    if (this.closed) return;
    const admitted = this.keys.admit(
      poolKeyId(key),
      key,
      () => {
        if (this.closed) return;
        this.poolOf(key);
        this.fill();
      },
      (_id, pool) => {
        for (const instance of pool.ready.splice(0)) this.discard(instance);
      },
    );
    if (admitted) this.track(admitted);
  }

  private track(work: Promise<unknown>): void {
    this.containers.track(work);
  }
}

const poolName = () => `pool-${randomBytes(6).toString('hex')}`;

const poolKeyId = (key: PoolKey): string => `${key.image}@${key.profile}`;
