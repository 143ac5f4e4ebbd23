import type { Backend } from '../../backends/backend.js';
import type { Logger } from '../../telemetry/logger.js';
import type { PoolKey } from './pool-types.js';

/**
 * Most keys a pool makes on demand (not warmed at start) at once; a new one past it evicts the
 * key taken from least recently. Every image a client names would otherwise keep instances of
 * its own.
 */
export const MAX_ON_DEMAND_KEYS = 16;

/** What a pool keeps per key that admission reads. */
export interface AdmittedKey {
  key: PoolKey;
  /** Warmed at start (the default image, configured sizes): never evicted, not counted. */
  pinned: boolean;
  /** When a taker last took from the key (ms since the epoch). */
  lastTaken: number;
}

/**
 * The keys of one pool, admitted on demand: a key met for the first time gets its entry only
 * once the backend has its image (pulled if it can be), so a name that is no image never
 * becomes a key that keeps retrying; past MAX_ON_DEMAND_KEYS the on-demand key taken from least
 * recently is evicted to make room.
 */
export class PoolKeys<K extends AdmittedKey> {
  private readonly checking = new Set<string>();

  constructor(
    private readonly entries: Map<string, K>,
    private readonly backend: Backend,
    private readonly logger: Logger,
  ) {}

  /** Keys made on demand (not pinned). */
  get onDemand(): number {
    let count = 0;
    for (const entry of this.entries.values()) if (!entry.pinned) count++;
    return count;
  }

  /**
   * Checks the image of `key` (identified by `id`) once; when it is there and the key still has
   * no entry, evicts (through `evict`) if the pool is full and calls `make`. The promise, for
   * the pool to track, or undefined when the key is being checked already.
   */
  admit(id: string, key: PoolKey, make: () => void, evict: (id: string, entry: K) => void): Promise<void> | undefined {
    if (this.checking.has(id)) return undefined;
    this.checking.add(id);
    return this.backend
      .ensureImage(key.image)
      .then(
        () => {
          if (this.entries.has(id)) return;
          if (this.onDemand >= MAX_ON_DEMAND_KEYS) this.evictLeastRecent(evict);
          make();
        },
        (err: Error) => this.logger.info({ err, image: key.image, profile: key.profile }, 'no pool for an image that is not available'),
      )
      .finally(() => this.checking.delete(id));
  }

  private evictLeastRecent(evict: (id: string, entry: K) => void): void {
    let oldest: [string, K] | undefined;
    for (const entry of this.entries) if (!entry[1].pinned && (!oldest || entry[1].lastTaken < oldest[1].lastTaken)) oldest = entry;
    if (!oldest) return;
    this.entries.delete(oldest[0]);
    evict(...oldest);
    this.logger.info({ image: oldest[1].key.image, profile: oldest[1].key.profile }, 'pool key evicted: too many on-demand keys');
  }
}
