import type Sqlite from 'better-sqlite3';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ServiceError } from '../../../../../errors.js';
import type { Clock } from '../../../../support/clock.js';
import { commandWrites, lookUpCommand } from '../embedded/command-args.js';
import { checkConfigFields, READ_ONLY_FIELD, type ConfigField } from '../embedded/config-fields.js';
import { OpenHandles, type EmbeddedEngineInput, SWEEP_BATCH, SWEEP_SECONDS, type SweptHandle } from '../embedded/open-handles.js';
import { deliver, MAX_VISIBILITY_SECONDS, parseDequeue, QUEUE_COMMANDS, type DequeueRequest, type QueueConfig } from './queue-commands.js';
import { QUEUE_SCHEMA, QueueTable } from './queue-table.js';
import type { CommandRequest, StoreEngine, StoreHandle, StoreOp, StoreTarget } from '../../store-engine.js';
import { createStoreFile, openStoreFile, removeStoreFile, storeFileBytes } from '../embedded/store-file.js';
import { Wakeups } from './wakeups.js';

/** A queue store's config, with SQS's defaults; `max_bytes` bounds the disk all bodies take. */
const QUEUE_CONFIG_FIELDS: Record<string, ConfigField> = {
  visibility_timeout_seconds: { type: 'integer', min: 0, max: MAX_VISIBILITY_SECONDS, default: 30 },
  max_attempts: { type: 'integer', min: 1, max: 1000, default: 5 },
  retention_seconds: { type: 'integer', min: 60, max: 1_209_600, default: 345_600 },
  max_message_bytes: { type: 'integer', min: 1, max: 1024 * 1024, default: 262_144 },
  max_messages: { type: 'integer', min: 1, max: 10_000_000, default: 100_000 },
  max_bytes: { type: 'integer', min: 1024, max: 2 ** 40, default: 256 * 1024 * 1024 },
  read_only: READ_ONLY_FIELD,
};

/**
 * The `queue` kind: SQS-like queues in a SQLite file on the host, run in-process. Every command
 * is one synchronous transaction, so callers on one handle or several never interleave. A
 * DEQUEUE with WAIT that finds nothing waits in-process: an ENQUEUE, NACK or REDRIVE on the same
 * store wakes it, and so does the time the next hidden message becomes visible; it never polls
 * the file in a loop.
 */
export class QueueStoreEngine implements StoreEngine {
  readonly kind = 'queue' as const;
  readonly ops: readonly StoreOp[] = ['command'];
  private readonly clock: Clock;
  private readonly handles: OpenHandles<QueueHandle>;
  /** Shared by all handles, so that an ENQUEUE through one wakes a DEQUEUE waiting on another. */
  private readonly wakeups = new Wakeups();

  constructor({ clock, logger, sweepSeconds = SWEEP_SECONDS }: EmbeddedEngineInput) {
    this.clock = clock;
    this.handles = new OpenHandles(logger, sweepSeconds);
  }

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    return checkConfigFields('queue', config, QUEUE_CONFIG_FIELDS);
  }

  /** DEQUEUE counts as a write: it hides messages and uses up attempts. */
  commandWrites(command: unknown[]): boolean {
    return commandWrites(QUEUE_COMMANDS, command);
  }

  async prepare(target: StoreTarget): Promise<void> {
    createStoreFile(target, QUEUE_SCHEMA);
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    const db = openStoreFile(target, QUEUE_SCHEMA, false);
    // checkConfigFields checked every field of QUEUE_CONFIG_FIELDS and filled its default; its
    // result is typed by that generic field table, not by QueueConfig, which the table describes.
    const config = this.checkConfig(target.config) as unknown as QueueConfig;
    const onClose = (handle: QueueHandle) => this.handles.delete(handle);
    return this.handles.add(new QueueHandle({ db, target, config, clock: this.clock, wakeups: this.wakeups, onClose }));
  }

  async destroy(target: StoreTarget): Promise<void> {
    await this.handles.closeStore(target.id);
    removeStoreFile(target.file);
  }

  /** Drops messages past retention and ended DEDUP windows from every open store now (the minute's sweep). */
  sweep(): Promise<void> {
    return this.handles.sweep();
  }

  async shutdown(): Promise<void> {
    await this.handles.shutdown();
  }
}

interface QueueHandleInput {
  db: Sqlite.Database;
  target: StoreTarget;
  config: QueueConfig;
  clock: Clock;
  wakeups: Wakeups;
  onClose: (handle: QueueHandle) => void;
}

class QueueHandle implements StoreHandle, SweptHandle {
  readonly storeId: string;
  private readonly table: QueueTable;
  private closed = false;

  constructor(private readonly input: QueueHandleInput) {
    this.storeId = input.target.id;
    this.table = new QueueTable(input.db);
  }

  async command({ command: argv, timeoutMs }: CommandRequest): Promise<unknown> {
    const { target, config, wakeups } = this.input;
    if (this.closed) throw new ServiceError('STORE_UNAVAILABLE', `queue store '${target.name}' is closed`);
    const [, spec] = lookUpCommand('queue', QUEUE_COMMANDS, argv);
    const args = argv.slice(1);
    if (!spec.run) return this.dequeue(parseDequeue(args, config), timeoutMs);
    const { run } = spec;
    const call = { table: this.table, args, now: this.now(), config, store: target.name };
    const result = this.table.transaction(spec.writes, () => run(call));
    if (spec.wakes) wakeups.wake(this.storeId);
    return result;
  }

  /**
   * Delivers ready messages; with WAIT and none ready, waits until one may be (a wake-up or the
   * next hidden message's time) and tries again, for WAIT seconds but never past the request's
   * timeout. Ends with [] at the deadline or when the handle closes (the store is deleted, the
   * server stops): nothing is delivered that the caller cannot receive.
   */
  private async dequeue(request: DequeueRequest, timeoutMs: number): Promise<unknown[]> {
    const { config, wakeups } = this.input;
    const deadline = performance.now() + Math.min(request.waitSeconds * 1000, timeoutMs);
    for (;;) {
      if (this.closed) return [];
      const now = this.now();
      const messages = this.table.transaction(true, () => deliver({ table: this.table, now, config }, request));
      if (messages.length > 0) return messages;
      const left = deadline - performance.now();
      if (left <= 0) return [];
      const next = this.table.nextVisibleAt(now);
      await wakeups.wait(this.storeId, next === null ? left : Math.min(left, next - now));
    }
  }

  async sweep(): Promise<void> {
    const { config } = this.input;
    while (!this.closed) {
      const now = this.now();
      const deleted = this.table.transaction(true, () => {
        return this.table.deleteOld(now - config.retention_seconds * 1000, SWEEP_BATCH) + this.table.deleteOldDedup(now, SWEEP_BATCH);
      });
      if (deleted === 0) return;
      await yieldToEventLoop();
    }
  }

  async sizeBytes(): Promise<number> {
    return storeFileBytes(this.input.target.file);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.onClose(this);
    this.input.db.close();
    // Waiting DEQUEUEs look again, see the handle closed and answer [].
    this.input.wakeups.wake(this.storeId);
  }

  private now(): number {
    return this.input.clock().getTime();
  }
}
