import { randomBytes } from 'node:crypto';
import type { Backend } from '../../backends/backend.js';
import { DEFAULT_PROFILE } from '../../domain/sandbox-defaults.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Clock } from '../support/clock.js';
import type { Config, ConfigSection } from '../../config/config-schema.js';
import type { ServiceContext } from '../context.js';
import type { PoolBudget } from './pool-budget.js';
import { PoolContainers } from './pool-containers.js';
import { PoolKeys } from './pool-keys.js';
import { poolKeyId, type PoolKey, type PooledInstance, type PoolSize } from './pool-types.js';

/** What a pool is built from: the engine, its sizes (`[pool]`) and the default image it warms. */
export type PoolContext = Pick<ServiceContext, 'backend' | 'clock' | 'logger' | 'poolBudget' | 'replica'> & { config: ConfigSection<'pool'> & Pick<Config, 'defaultImage'> };

/** A key no one took from for this long gives its instances back (keys warmed at start excepted). */
export const POOL_IDLE_MS = 10 * 60_000;
/** Takes counted for a key's demand: those of the last minute. */
export const DEMAND_WINDOW_MS = 60_000;
/** Most instances made at once, over every key: the engine keeps serving requests meanwhile. */
const MAX_MAKING = 2;
/** After a failed make, a key waits this long before it makes ahead of demand again. */
const MAKE_RETRY_MS = 30_000;
/**
 * What a pool instance costs the host while it waits, as the memory budget counts it: its
 * cgroup charge (the agent, about 2.5 MiB measured) with room for the kernel's own
 * per-container state (mounts, namespaces, the veth pair). What a command charges while it
 * runs in one is the command's own, which a sandbox's limits bound, not the pool's.
 */
export const IDLE_INSTANCE_MB = 16;

/** What a pool keeps per key. */
export interface KeyEntry<I extends PooledInstance> {
  key: PoolKey;
  /** Configured size: instances kept ready whatever the demand. */
  size: number;
  /** Ready instances: waiting to be taken. */
  ready: I[];
  /** Instances being made ahead of demand. */
  making: number;
  /** When a taker last took from the key (ms since the epoch). */
  lastTaken: number;
  /** Warmed at start and never evicted. */
  pinned: boolean;
  /** Until when a failed make holds back making ahead of demand. */
  retryAt: number;
}

/** The words and the kind of instances of one pool. */
export interface PoolKind {
  /** Names the pool's instances in log lines ('pool instance'). */
  instance: string;
  /** First part of its instances' names ('pool' makes `pool-<12 hex>`). */
  namePrefix: string;
  /** The log line of a make that failed ahead of demand. */
  makeFailed: string;
  /** The log line of an idle key let go, if the pool logs it. */
  emptied?: string;
}

/**
 * The per-key bookkeeping both pools share (WarmPool, RunPool): the keys (admitted on demand
 * through PoolKeys, or pinned at start with their configured size), their ready instances and
 * those being made, a key's target (its size, or its demand within the memory budget), making
 * ahead of demand up to it, idle eviction, forgetting an image, and close. Each pool adds how
 * instances are taken and given back and how its demand is counted.
 */
export abstract class KeyedPool<I extends PooledInstance, E extends KeyEntry<I>> {
  protected readonly entries = new Map<string, E>();
  /** Which keys have an entry: only images that exist, at most MAX_ON_DEMAND_KEYS on demand. */
  private readonly admission: PoolKeys<E>;
  /** Its containers: made, destroyed, held until destroyed (or handed over to a sandbox). */
  protected readonly containers: PoolContainers;
  private making = 0;
  /** Per key id, instances being made for takers who found none ready (`coldStart`). */
  private readonly takersWaiting = new Map<string, number>();
  protected closed = false;

  protected readonly backend: Backend;
  protected readonly clock: Clock;
  protected readonly logger: Logger;
  private readonly budget: PoolBudget;
  /** Sizes (`pool.size`, `pool.sizes`) and the default image: pinned keys are warmed at start. */
  private readonly configured: { size: number; sizes: readonly PoolSize[]; defaultImage: string };

  constructor(
    ctx: PoolContext,
    private readonly kind: PoolKind,
  ) {
    this.backend = ctx.backend;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.budget = ctx.poolBudget;
    this.configured = { size: ctx.config.poolSize, sizes: ctx.config.poolSizes, defaultImage: ctx.config.defaultImage };
    this.budget.track(() => this.heldCount() * IDLE_INSTANCE_MB);
    this.admission = new PoolKeys(this.entries, this.backend, this.logger);
    this.containers = new PoolContainers(this.backend, this.logger, kind.instance, ctx.replica.id);
  }

  /** A new key's entry with the pool's own demand fields. */
  protected abstract newEntry(base: KeyEntry<I>): E;
  /** The instances a key wants now from its demand alone (the budget is applied after). */
  protected abstract wanted(entry: E): number;
  /** Gives back the ready instances of `entry` beyond what its demand asks for now. */
  protected abstract shed(entry: E): void;
  /** Makes a running instance of `key` for this pool. */
  protected abstract make(key: PoolKey, name: string): Promise<I>;

  /** Instances of `entry` taken and not yet given back (counted as held); none by default. */
  protected inUse(_entry: E): number {
    return 0;
  }

  /** Whether the pool makes instances at all. */
  protected get enabled(): boolean {
    return true;
  }

  /** Starts making the default image's instances and every configured key's. */
  warm(): void {
    if (!this.enabled) return;
    this.entryOf({ image: this.configured.defaultImage, profile: DEFAULT_PROFILE }).pinned = true;
    for (const key of this.configured.sizes) this.entryOf(key).pinned = true;
    this.fill();
  }

  /** Ready instances, over every key. */
  get size(): number {
    let total = 0;
    for (const entry of this.entries.values()) total += entry.ready.length;
    return total;
  }

  /** How many instances `key` aims at now: its size or its recent demand. */
  target(key: PoolKey): number {
    const entry = this.entries.get(poolKeyId(key));
    return entry ? this.targetOf(entry) : 0;
  }

  /** Whether the instance is this pool's (ready, being made, taken and not yet destroyed or handed over). */
  holds(uuid: string): boolean {
    return this.containers.holds(uuid);
  }

  /** On-demand keys (not pinned). */
  get onDemandKeys(): number {
    return this.admission.onDemand;
  }

  /**
   * Gives back the ready instances beyond each key's demand, and the instances of keys no one
   * took from for POOL_IDLE_MS and none has in use.
   */
  evictIdle(): void {
    const before = this.clock().getTime() - POOL_IDLE_MS;
    for (const [id, entry] of this.entries) {
      this.shed(entry);
      if (entry.pinned || entry.lastTaken > before || this.inUse(entry) > 0) continue;
      this.entries.delete(id);
      for (const instance of entry.ready.splice(0)) this.discard(instance);
      if (this.kind.emptied) this.logger.info({ image: entry.key.image, profile: entry.key.profile }, this.kind.emptied);
    }
  }

  /** Lets go of an image's keys (the image is being removed): their ready instances are destroyed. */
  async forgetImage(image: string): Promise<void> {
    for (const [id, entry] of this.entries) {
      if (entry.key.image !== image) continue;
      this.entries.delete(id);
      for (const instance of entry.ready.splice(0)) this.discard(instance);
    }
    await this.settled();
  }

  /** Resolves once no instance is being made, reset or removed. */
  async settled(): Promise<void> {
    await this.containers.settled();
  }

  /** Stops making instances and removes every ready one, also those still being made. */
  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.entries.values()) for (const instance of entry.ready.splice(0)) this.discard(instance);
    await this.settled();
  }

  /** The entry of `key`, made (unpinned, with its configured size) if it has none. */
  protected entryOf(key: PoolKey): E {
    const id = poolKeyId(key);
    let entry = this.entries.get(id);
    if (!entry) {
      const size = this.configured.sizes.find((sized) => poolKeyId(sized) === id)?.size ?? this.configured.size;
      entry = this.newEntry({ key, size, ready: [], making: 0, lastTaken: this.clock().getTime(), pinned: false, retryAt: 0 });
      this.entries.set(id, entry);
    }
    return entry;
  }

  /** Instances of `entry` ready, in use or being made (those being destroyed no longer count). */
  protected heldOf(entry: E): number {
    return entry.ready.length + this.inUse(entry) + entry.making;
  }

  /** The demand's wanted count; past the size only while the budget has room for what is not yet made. */
  protected targetOf(entry: E): number {
    const wanted = this.wanted(entry);
    const held = this.heldOf(entry);
    if (wanted <= Math.max(held, entry.size)) return wanted;
    const room = Math.floor((this.budget.limitMb - this.budget.usedMb()) / IDLE_INSTANCE_MB);
    return Math.max(entry.size, Math.min(wanted, held + room));
  }

  /**
   * Makes instances for the keys below their target, at most MAX_MAKING at once, and none of a
   * key while a taker waits for an instance of it made for it (`coldStart`): in a burst the
   * engine serves the takers first.
   */
  protected fill(): void {
    if (this.closed || !this.enabled) return;
    const now = this.clock().getTime();
    for (const [id, entry] of this.entries) {
      if (this.takersWaiting.has(id)) continue;
      // Size 0 makes nothing ahead of demand.
      while (entry.size > 0 && this.making < MAX_MAKING && entry.retryAt <= now && this.heldOf(entry) < this.targetOf(entry)) {
        this.makeAhead(entry);
      }
    }
  }

  /** An instance of `key` made for a taker who found none ready: the key makes none ahead until it is made. */
  coldStart<T>(key: PoolKey, made: Promise<T>): Promise<T> {
    const id = poolKeyId(key);
    this.takersWaiting.set(id, (this.takersWaiting.get(id) ?? 0) + 1);
    return made.finally(() => {
      const waiting = (this.takersWaiting.get(id) ?? 1) - 1;
      if (waiting > 0) this.takersWaiting.set(id, waiting);
      else this.takersWaiting.delete(id);
      this.fill();
    });
  }

  /** A new instance name of this pool. */
  protected newName(): string {
    return `${this.kind.namePrefix}-${randomBytes(6).toString('hex')}`;
  }

  /** Makes the entry of a key met for the first time, once its image is known to exist. */
  protected admit(key: PoolKey): void {
    if (this.closed || !this.enabled) return;
    const admitted = this.admission.admit(
      poolKeyId(key),
      key,
      () => {
        if (this.closed) return;
        this.entryOf(key);
        this.fill();
      },
      (_id, entry) => {
        for (const instance of entry.ready.splice(0)) this.discard(instance);
      },
    );
    if (admitted) this.track(admitted);
  }

  /** Destroys an instance in the background (the sweep removes one the engine failed to). */
  protected discard(instance: PooledInstance): void {
    this.containers.discard(instance);
  }

  protected track(work: Promise<unknown>): void {
    this.containers.track(work);
  }

  /** Whether `entry` is still its key's (not evicted nor forgotten) and the pool is open. */
  protected current(entry: E): boolean {
    return !this.closed && this.entries.get(poolKeyId(entry.key)) === entry;
  }

  private makeAhead(entry: E): void {
    entry.making++;
    this.making++;
    const made = this.make(entry.key, this.newName()).then(
      (instance) => {
        if (!this.current(entry)) this.discard(instance);
        else entry.ready.push(instance);
      },
      (err: Error) => {
        entry.retryAt = this.clock().getTime() + MAKE_RETRY_MS;
        this.logger.warn({ err, image: entry.key.image, profile: entry.key.profile }, `${this.kind.makeFailed}; retrying in ${MAKE_RETRY_MS / 1000} s`);
      },
    );
    this.track(
      made.finally(() => {
        entry.making--;
        this.making--;
        this.fill();
      }),
    );
  }

  /** Instances ready, in use or being made over every key: what the memory budget counts. */
  private heldCount(): number {
    let count = 0;
    for (const entry of this.entries.values()) count += this.heldOf(entry);
    return count;
  }
}
