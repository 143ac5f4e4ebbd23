import type { WarmPoolApi } from './api.js';
import { DEMAND_WINDOW_MS, KeyedPool, type KeyEntry, type PoolContext } from './keyed-pool.js';
import { poolKeyId, type PoolKey, type PooledInstance, type TakenInstance } from './pool-types.js';

/**
 * A key keeps, beyond its configured size, what its takers took in this share of the window
 * (10 s of the recent rate): enough that a burst at that rate meets warm instances while the
 * refill (a few containers a second) catches up.
 */
const DEMAND_SHARE = 6;
/** Most ready instances one key grows to with demand (the most `pool.sizes` may configure). */
const MAX_DEMAND_SIZE = 64;

interface WarmKey extends KeyEntry<PooledInstance> {
  /** When each take of the last DEMAND_WINDOW_MS happened, oldest first. */
  takes: number[];
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
 * the extra instances back. The per-key bookkeeping is KeyedPool's.
 */
export class WarmPool extends KeyedPool<PooledInstance, WarmKey> implements WarmPoolApi {
  constructor(ctx: PoolContext) {
    super(ctx, { instance: 'pool instance', namePrefix: 'pool', makeFailed: 'pool not filled', emptied: 'idle pool emptied' });
  }

  /** A ready instance of `key`, else one made now for the caller; either way used once. */
  take(key: PoolKey): TakenInstance {
    const ready = this.takeReady(key);
    if (ready) return { name: ready.name, warm: true, instance: Promise.resolve(ready) };
    const name = this.newName();
    return { name, warm: false, instance: this.make(key, name) };
  }

  /** A ready instance of `key`, or undefined (and the key's pool starts filling, or is made once its image is found). */
  takeReady(key: PoolKey): PooledInstance | undefined {
    const pool = this.entries.get(poolKeyId(key));
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

  /** A claimed instance is a sandbox now (the store knows it): the pool lets go of it. */
  handOver(instance: PooledInstance): void {
    this.containers.release(instance.uuid);
  }

  /** Gives back a taken instance that was not used (it is still pristine). */
  restore(instance: PooledInstance): void {
    const pool = this.entries.get(poolKeyId(instance.key));
    if (this.closed || !pool) this.discard(instance);
    else pool.ready.unshift(instance);
  }

  /**
   * Destroys a used or refused instance in the background. The pool lets go of it either way: one
   * the engine failed to remove is left to the sweep (RecoveryService.sweep).
   */
  override discard(instance: PooledInstance): void {
    super.discard(instance);
  }

  protected newEntry(base: KeyEntry<PooledInstance>): WarmKey {
    return { ...base, takes: [] };
  }

  /** The configured size plus the takes of the last DEMAND_WINDOW_MS / DEMAND_SHARE, at the window's rate. */
  protected wanted(pool: WarmKey): number {
    const since = this.clock().getTime() - DEMAND_WINDOW_MS;
    while ((pool.takes[0] ?? Infinity) <= since) pool.takes.shift();
    // Size 0 keeps nothing ahead of demand, however high the demand.
    const demand = pool.size > 0 ? Math.floor(pool.takes.length / DEMAND_SHARE) : 0;
    return Math.min(Math.max(MAX_DEMAND_SIZE, pool.size), pool.size + demand);
  }

  /** The newest ready instances beyond the target go (the oldest are taken first). */
  protected shed(pool: WarmKey): void {
    const surplus = pool.ready.length - this.targetOf(pool);
    if (surplus > 0) for (const instance of pool.ready.splice(pool.ready.length - surplus)) this.discard(instance);
  }

  protected make(key: PoolKey, name: string): Promise<PooledInstance> {
    return this.containers.make(key, name, false, {});
  }
}
