import type { WarmPoolApi } from './api.js';
import { DEMAND_WINDOW_MS, KeyedPool, POOL_IDLE_MS, type KeyEntry, type PoolContext } from './keyed-pool.js';
import { poolKeyId, type PoolKey, type PooledInstance, type TakenInstance } from './pool-types.js';

/**
 * A key keeps, beyond its configured size, what its takers took in this share of the window
 * (10 s of the recent rate): enough that a burst at that rate meets warm instances while the
 * refill (a few containers a second) catches up.
 */
const DEMAND_SHARE = 6;
/** Most ready instances one key grows to with demand (the most `pool.sizes` may configure). */
const MAX_DEMAND_SIZE = 64;
/** Takes this close together count as one burst. */
const BURST_SPAN_MS = 10_000;
/** How long a key keeps ready for its largest burst: as long as an idle key keeps its pool. */
const BURST_MEMORY_MS = POOL_IDLE_MS;
/** How long after a take the pool starts making its replacement (fillAfterTake). */
const REFILL_AFTER_TAKE_MS = 100;

interface WarmKey extends KeyEntry<PooledInstance> {
  /** When each take of the last DEMAND_WINDOW_MS happened, oldest first. */
  takes: number[];
  /** The most takes within BURST_SPAN_MS in the last BURST_MEMORY_MS, and when it was reached. */
  burst: { takes: number; at: number };
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
 * instances as were taken in 10 s at the rate of the last minute, or as its largest burst of
 * the last 10 minutes took (the most takes within 10 s), whichever is more, while the pools' memory
 * budget (`pool.memory_mb`) has room; as takes age out, `evictIdle` gives the extra instances
 * back. The per-key bookkeeping is KeyedPool's.
 */
export class WarmPool extends KeyedPool<PooledInstance, WarmKey> implements WarmPoolApi {
  private refilling = false;

  constructor(ctx: PoolContext) {
    super(ctx, { instance: 'pool instance', namePrefix: 'pool', makeFailed: 'pool not filled', emptied: 'idle pool emptied' });
  }

  /** A ready instance of `key`, else one made now for the caller; either way used once. */
  take(key: PoolKey): TakenInstance {
    const ready = this.takeReady(key);
    if (ready) return { name: ready.name, warm: true, instance: Promise.resolve(ready) };
    const name = this.newName();
    return { name, warm: false, instance: this.coldStart(key, this.make(key, name)) };
  }

  /** A ready instance of `key` (and the key's pool fills up behind it), or undefined (the key is made once its image is found). */
  takeReady(key: PoolKey): PooledInstance | undefined {
    const pool = this.entries.get(poolKeyId(key));
    if (!pool) {
      this.admit(key);
      return undefined;
    }
    const now = this.clock().getTime();
    pool.lastTaken = now;
    pool.takes.push(now);
    noteBurst(pool, now);
    const ready = pool.ready.shift();
    // A taker who finds none makes one (`coldStart`), which fills the pool once it is made.
    if (ready) this.fillAfterTake();
    return ready;
  }

  /**
   * Fills the pool REFILL_AFTER_TAKE_MS after a take (once for the takes in that time): the
   * claimed sandbox's create and first commands run before the engine makes its replacement,
   * which on two cores slowed them when both ran at once.
   */
  private fillAfterTake(): void {
    if (this.refilling) return;
    this.refilling = true;
    this.track(
      new Promise<void>((resolve) =>
        setTimeout(() => {
          this.refilling = false;
          this.fill();
          resolve();
        }, REFILL_AFTER_TAKE_MS),
      ),
    );
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
    return { ...base, takes: [], burst: { takes: 0, at: 0 } };
  }

  /**
   * The configured size plus the takes of the last DEMAND_WINDOW_MS / DEMAND_SHARE (the
   * window's rate), or the key's largest recent burst if that is more.
   */
  protected wanted(pool: WarmKey): number {
    const now = this.clock().getTime();
    while ((pool.takes[0] ?? Infinity) <= now - DEMAND_WINDOW_MS) pool.takes.shift();
    // Size 0 keeps nothing ahead of demand, however high the demand.
    if (pool.size === 0) return 0;
    const burst = pool.burst.at > now - BURST_MEMORY_MS ? pool.burst.takes : 0;
    const demand = Math.max(pool.size + Math.floor(pool.takes.length / DEMAND_SHARE), burst);
    return Math.min(Math.max(MAX_DEMAND_SIZE, pool.size), demand);
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

/** Counts the takes of the last BURST_SPAN_MS (takes are in time order) into the key's largest burst. */
function noteBurst(pool: WarmKey, now: number): void {
  let takes = 0;
  for (let i = pool.takes.length - 1; i >= 0 && (pool.takes[i] ?? 0) > now - BURST_SPAN_MS; i--) takes++;
  if (takes >= pool.burst.takes || pool.burst.at <= now - BURST_MEMORY_MS) pool.burst = { takes, at: now };
}
