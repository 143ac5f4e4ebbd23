import type Sqlite from 'better-sqlite3';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ServiceError } from '../../../../../errors.js';
import type { Clock } from '../../../../support/clock.js';
import { commandWrites, lookUpCommand } from '../embedded/command-args.js';
import { checkConfigFields, READ_ONLY_FIELD, type ConfigField } from '../embedded/config-fields.js';
import { KV_COMMANDS } from './kv-commands.js';
import { KV_SCHEMA, KvTable } from './kv-table.js';
import { OpenHandles, type EmbeddedEngineInput, SWEEP_BATCH, SWEEP_SECONDS, type SweptHandle } from '../embedded/open-handles.js';
import type { CommandRequest, StoreEngine, StoreHandle, StoreOp, StoreTarget } from '../../store-engine.js';
import { createStoreFile, openStoreFile, removeStoreFile, storeFileBytes } from '../embedded/store-file.js';

/** A kv store's config: its size limit (keys and values, as JSON text) and read-only. */
const KV_CONFIG_FIELDS: Record<string, ConfigField> = {
  max_bytes: { type: 'integer', min: 1024, max: 2 ** 40, default: 256 * 1024 * 1024 },
  read_only: READ_ONLY_FIELD,
};

/**
 * The `kv` kind: a Redis-compatible subset of commands over JSON values, in a SQLite file on
 * the host, run in-process. better-sqlite3 is synchronous and every command is one transaction
 * that awaits nothing, so commands of any number of callers, on one handle or several, never
 * interleave; no lock is needed on top.
 */
export class KvStoreEngine implements StoreEngine {
  readonly kind = 'kv' as const;
  readonly ops: readonly StoreOp[] = ['command'];
  private readonly clock: Clock;
  private readonly handles: OpenHandles<KvHandle>;

  constructor({ clock, logger, sweepSeconds = SWEEP_SECONDS }: EmbeddedEngineInput) {
    this.clock = clock;
    this.handles = new OpenHandles(logger, sweepSeconds);
  }

  checkConfig(config: Record<string, unknown>): Record<string, unknown> {
    return checkConfigFields('kv', config, KV_CONFIG_FIELDS);
  }

  commandWrites(command: unknown[]): boolean {
    return commandWrites(KV_COMMANDS, command);
  }

  async prepare(target: StoreTarget): Promise<void> {
    createStoreFile(target, KV_SCHEMA);
  }

  async open(target: StoreTarget): Promise<StoreHandle> {
    const db = openStoreFile(target, KV_SCHEMA, false);
    const maxBytes = this.checkConfig(target.config).max_bytes as number;
    return this.handles.add(new KvHandle(db, target, maxBytes, this.clock, (handle) => this.handles.delete(handle)));
  }

  async destroy(target: StoreTarget): Promise<void> {
    await this.handles.closeStore(target.id);
    removeStoreFile(target.file);
  }

  /** Drops expired keys from every open store now (the minute's sweep). */
  sweep(): Promise<void> {
    return this.handles.sweep();
  }

  async shutdown(): Promise<void> {
    await this.handles.shutdown();
  }
}

class KvHandle implements StoreHandle, SweptHandle {
  readonly storeId: string;
  private readonly table: KvTable;
  private closed = false;

  constructor(
    private readonly db: Sqlite.Database,
    private readonly target: StoreTarget,
    private readonly maxBytes: number,
    private readonly clock: Clock,
    private readonly onClose: (handle: KvHandle) => void,
  ) {
    this.storeId = target.id;
    this.table = new KvTable(db);
  }

  async command({ command: argv }: CommandRequest): Promise<unknown> {
    if (this.closed) throw new ServiceError('STORE_UNAVAILABLE', `kv store '${this.target.name}' is closed`);
    const [name, spec] = lookUpCommand('kv', KV_COMMANDS, argv);
    const now = this.clock().getTime();
    return this.table.transaction(spec.writes, () => {
      const before = spec.writes ? this.table.bytes() : 0;
      const result = spec.run({ table: this.table, args: argv.slice(1), now });
      if (spec.writes) this.enforceLimit(name, before, now);
      return result;
    });
  }

  /**
   * Refuses (413, rolling the command back) a write that grew the store past its limit. Keys
   * that expired but were not swept yet are dropped first, since they hold no data any more. A
   * write that does not grow the store always passes, so a store over a lowered limit can
   * still be emptied.
   */
  private enforceLimit(command: string, before: number, now: number): void {
    let after = this.table.bytes();
    if (after <= this.maxBytes || after <= before) return;
    let deleted = SWEEP_BATCH;
    while (deleted === SWEEP_BATCH) deleted = this.table.deleteExpired(now, SWEEP_BATCH);
    after = this.table.bytes();
    if (after <= this.maxBytes) return;
    throw new ServiceError(
      'PAYLOAD_TOO_LARGE',
      `command: ${command}: kv store '${this.target.name}' is full: its keys and values would take ${after} bytes, ` +
        `more than config.max_bytes (${this.maxBytes}); delete keys or raise config.max_bytes`,
    );
  }

  async sweep(): Promise<void> {
    while (!this.closed) {
      const deleted = this.table.transaction(true, () => this.table.deleteExpired(this.clock().getTime(), SWEEP_BATCH));
      if (deleted < SWEEP_BATCH) return;
      await yieldToEventLoop();
    }
  }

  async sizeBytes(): Promise<number> {
    return storeFileBytes(this.target.file);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose(this);
    this.db.close();
  }
}
