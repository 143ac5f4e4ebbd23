import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import { ConcurrencyLimit } from './concurrency-limit.js';

/** Containers the engine removes at once in the background. */
export const MAX_REMOVING = 4;

/**
 * Sandboxes whose record is gone while the engine still removes their container: a DELETE
 * answers once the record is deleted (the name is free at once) and the removal goes on here.
 * What must follow the container rather than the record asks this: the packet filter keeps a
 * departing container's rules until it is gone, and a volume is deleted only once no departing
 * container mounts it. Nothing is lost across a crash: a container whose record is gone is an
 * orphan, which the start-up reconciliation and the orphan sweep remove.
 */
export class Departures {
  private readonly pending = new Map<string, { record: SandboxRecord; done: Promise<void> }>();
  /**
   * Engine removals at once: the DELETEs of many sandboxes answer within milliseconds, and
   * without a bound every removal would reach the engine together (500 at once took the load
   * average of this 2-core machine to 90).
   */
  private readonly engine = new ConcurrencyLimit(MAX_REMOVING);

  constructor(private readonly logger: Logger) {}

  /**
   * Deletes a sandbox's record and answers once it is deleted; its container's removal goes
   * on, and `afterwards` runs once it is over (whether or not the engine managed: a failure is
   * logged and left to the orphan sweep). The sandbox counts as departing from before its
   * record is deleted, so that no reader sees it in neither place.
   */
  async depart(record: SandboxRecord, steps: { deleteRecord(): Promise<void>; removeContainer(): Promise<void>; afterwards(): Promise<void> }): Promise<void> {
    const deleted = steps.deleteRecord();
    const removed = deleted.then(
      () => this.removeWithin(steps.removeContainer).catch((err: unknown) => this.logger.error({ err, sandbox: record.name, uuid: record.uuid }, "a removed sandbox's container was not removed; the orphan sweep will retry")),
      // The record stays, and with it the container: nothing departs.
      () => undefined,
    );
    const done = removed
      .finally(() => this.pending.delete(record.uuid))
      .then(() => steps.afterwards())
      .catch((err: unknown) => this.logger.error({ err, sandbox: record.name }, "work after a removed sandbox's container went failed"));
    this.pending.set(record.uuid, { record, done });
    await deleted;
  }

  private async removeWithin(removeContainer: () => Promise<void>): Promise<void> {
    const release = await this.engine.acquire();
    try {
      await removeContainer();
    } finally {
      release();
    }
  }

  /** The records of sandboxes whose container is still being removed. */
  records(): SandboxRecord[] {
    return [...this.pending.values()].map((departure) => departure.record);
  }

  get size(): number {
    return this.pending.size;
  }

  /** Resolves once every departure `which` selects (default: all) has finished. */
  async settled(which: (record: SandboxRecord) => boolean = () => true): Promise<void> {
    await Promise.all([...this.pending.values()].filter((departure) => which(departure.record)).map((departure) => departure.done));
  }
}
