import type { Logger } from '../../../../../telemetry/logger.js';
import type { ServiceContext } from '../../../../context.js';
import { repeatEvery } from '../../../../support/background-loop.js';

/** How often an embedded kind's open stores drop what has expired (kv keys, old queue messages). */
export const SWEEP_SECONDS = 60;
/** Rows a sweep deletes per transaction, so that commands run between its batches. */
export const SWEEP_BATCH = 500;

/** A handle of an embedded kind, as its engine keeps it. */
/** What the kv and queue engines are made with. */
export interface EmbeddedEngineInput extends Pick<ServiceContext, 'clock' | 'logger'> {
  /** Seconds between sweeps (expired keys, messages past retention); default 60, 0 for none (tests call `sweep()`). */
  sweepSeconds?: number;
}

export interface SweptHandle {
  readonly storeId: string;
  /** Deletes what has expired, in small transactions so that commands run in between. */
  sweep(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The open handles of one embedded kind and the sweep that runs over them every minute. A
 * store that nobody opens is not swept; what has expired in it stays invisible to every
 * command and goes at the first sweep after it is opened again.
 */
export class OpenHandles<H extends SweptHandle> {
  private readonly handles = new Set<H>();
  private readonly stopSweeps: () => Promise<void>;

  constructor(
    private readonly logger: Logger,
    sweepSeconds: number,
  ) {
    this.stopSweeps = repeatEvery(sweepSeconds, () => this.sweep(), logger);
  }

  add(handle: H): H {
    this.handles.add(handle);
    return handle;
  }

  /** Called by a handle as it closes. */
  delete(handle: H): void {
    this.handles.delete(handle);
  }

  /** One sweep over every open handle; a failing store is logged and the others still swept. */
  async sweep(): Promise<void> {
    for (const handle of [...this.handles]) {
      try {
        await handle.sweep();
      } catch (err) {
        this.logger.warn({ err, store: handle.storeId }, 'store sweep failed');
      }
    }
  }

  /** Closes the handles still open on a store (it is being deleted). */
  async closeStore(storeId: string): Promise<void> {
    await Promise.all([...this.handles].filter((handle) => handle.storeId === storeId).map((handle) => handle.close()));
  }

  /** Stops the sweeps (waiting for one under way) and closes every handle. */
  async shutdown(): Promise<void> {
    await this.stopSweeps();
    await Promise.all([...this.handles].map((handle) => handle.close()));
  }
}
