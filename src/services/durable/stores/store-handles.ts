import { notFound } from '../../../errors.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { Clock } from '../../support/clock.js';
import type { TimerSource } from '../durable-timers.js';
import type { StoreHandle } from './store-engine.js';

/** An open handle is closed after this long unused (connections and pools are not held forever). */
export const HANDLE_IDLE_MS = 5 * 60_000;

interface Cached {
  opening: Promise<StoreHandle>;
  /** The handle, once open. */
  handle?: StoreHandle;
  /** Calls running on it now; a handle in use is never closed for idleness. */
  inUse: number;
  /** Epoch ms of the last call's end (or of the open). */
  lastUsed: number;
}

/**
 * The open handle of each store, opened on first use and shared by every call after, closed
 * after HANDLE_IDLE_MS unused, on PATCH and delete of its store, and at shutdown. It is a source
 * of the durable-timers driver: its due time is the earliest idle deadline, so a quiet server
 * closes pools without a loop of its own (the handles live in memory; nothing of them is kept).
 */
export class StoreHandles implements TimerSource {
  readonly name = 'store-handles';
  private readonly cache = new Map<string, Cached>();
  /**
   * Ids of deleted stores. A call that found its store just before the delete must not open a
   * handle after it (an embedded engine would make the file again); ids are never reused, and a
   * process sees few deletes, so the set is kept for the process's life.
   */
  private readonly retired = new Set<string>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Tells the driver a new idle deadline exists. */
    private readonly poke: () => void,
  ) {}

  /**
   * Runs `work` on the store's handle, opened by `open` when none is cached (one open for
   * concurrent first calls). NOT_FOUND once the store is retired.
   */
  async use<T>(store: { id: string; name: string }, open: () => Promise<StoreHandle>, work: (handle: StoreHandle) => Promise<T>): Promise<T> {
    const id = store.id;
    if (this.retired.has(id)) throw notFound(`store '${store.name}' not found`);
    let entry = this.cache.get(id);
    if (!entry) {
      const created: Cached = { opening: open(), inUse: 0, lastUsed: this.clock().getTime() };
      created.opening.then(
        (handle) => (created.handle = handle),
        // A failed open is not kept: the next call tries again (the server may be back).
        () => this.cache.get(id) === created && this.cache.delete(id),
      );
      this.cache.set(id, created);
      entry = created;
      this.poke();
    }
    entry.inUse++;
    try {
      return await work(await entry.opening);
    } finally {
      entry.inUse--;
      entry.lastUsed = this.clock().getTime();
    }
  }

  /** The store's handle when one is open now, without opening one. */
  peek(id: string): StoreHandle | undefined {
    return this.cache.get(id)?.handle;
  }

  /** Closes the store's handle, if one is cached (calls running on it see their engine's error). */
  async close(id: string): Promise<void> {
    const entry = this.cache.get(id);
    if (!entry) return;
    this.cache.delete(id);
    await closeQuietly(entry, this.logger, id);
  }

  /** Closes the handle of a store being deleted and refuses to open it again; resolves once it is closed. */
  async retire(id: string): Promise<void> {
    this.retired.add(id);
    await this.close(id);
  }

  /** Closes every handle (server shutdown). */
  async closeAll(): Promise<void> {
    const entries = [...this.cache.entries()];
    this.cache.clear();
    await Promise.all(entries.map(([id, entry]) => closeQuietly(entry, this.logger, id)));
  }

  /** Handles cached now (open or opening). */
  get size(): number {
    return this.cache.size;
  }

  /**
   * The earliest idle deadline of the handles not in use (one in use is read again on the
   * driver's next wake, at most 30 s later, rather than being due over and over while it runs).
   */
  nextDue(): Date | null {
    let earliest: number | undefined;
    for (const entry of this.cache.values()) {
      if (entry.inUse > 0) continue;
      const due = entry.lastUsed + HANDLE_IDLE_MS;
      if (earliest === undefined || due < earliest) earliest = due;
    }
    return earliest === undefined ? null : new Date(earliest);
  }

  async tick(now: Date): Promise<void> {
    const idle = [...this.cache.entries()].filter(([, entry]) => entry.inUse === 0 && entry.lastUsed + HANDLE_IDLE_MS <= now.getTime());
    for (const [id] of idle) this.cache.delete(id);
    await Promise.all(idle.map(([id, entry]) => closeQuietly(entry, this.logger, id)));
  }
}

/** Closes a cached handle once its open settles; a failing close is logged (the handle is let go either way). */
async function closeQuietly(entry: Cached, logger: Logger, id: string): Promise<void> {
  try {
    const handle = await entry.opening;
    await handle.close();
  } catch (err) {
    if (entry.handle) logger.warn({ store: id, err: err instanceof Error ? err.message : String(err) }, 'store handle did not close cleanly');
  }
}
