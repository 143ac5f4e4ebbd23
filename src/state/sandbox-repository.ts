import type { Kysely, Selectable } from 'kysely';
import type { SandboxNetwork } from '../domain/egress.js';
import type { Profile } from '../domain/profiles.js';
import type { VolumeMount } from '../domain/volumes.js';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, SandboxTable } from './schema.js';
import { assignments, placeholders, type Sql } from './sql.js';

/**
 * Stored status. `creating`, `archiving` and `removing` are in-flight states that recovery
 * resolves; `lost` is a sandbox whose container was removed outside sandboxd. The allowed moves
 * between them are in services/sandboxes/lifecycle.ts.
 */
export type SandboxStatus = 'creating' | 'running' | 'stopped' | 'lost' | 'archiving' | 'archived' | 'removing';

export interface Lifecycle {
  auto_stop_after_seconds?: number;
  auto_archive_after_seconds?: number;
  auto_delete_after_seconds?: number;
}

/**
 * A sandbox as stored: its row, with the JSON columns (labels, lifecycle, env) parsed and the
 * status and profile narrowed. Field names are the column names, as on the wire.
 */
export interface SandboxRecord
  extends Decoded<
    SandboxTable,
    {
      status: SandboxStatus;
      profile: Profile;
      labels: Record<string, string>;
      lifecycle: Lifecycle | null;
      env: Record<string, string>;
      secret_mappings: Record<string, string> | null;
      network: SandboxNetwork | null;
      volumes: VolumeMount[] | null;
    }
  > {}

const codec = new RowCodec<SandboxTable, SandboxRecord>(['labels', 'lifecycle', 'env', 'secret_mappings', 'network', 'volumes']);

declare const transitioned: unique symbol;
/**
 * A status the lifecycle transitions table allowed (services/sandboxes/lifecycle.ts
 * `transition`): the only kind `update` writes, so that every status change goes through it.
 */
export type TransitionedStatus = SandboxStatus & { readonly [transitioned]: true };

type Patch = Partial<Omit<SandboxRecord, 'uuid' | 'name' | 'created_at' | 'status'>> & { status?: TransitionedStatus };

/** Sandboxes in the state store. */
export class SandboxRepository {
  /** The table's columns as the database reports them, read at the first update. */
  private columns?: Promise<ReadonlySet<string>>;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly sql: Sql,
  ) {}

  /** Inserts a new sandbox; false when the name is taken. */
  async insert(record: SandboxRecord): Promise<boolean> {
    const result = await this.db
      .insertInto('sandboxes')
      .values(codec.toRow(record))
      .onConflict((oc) => oc.column('name').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  /** Every exec and file operation starts here: a prepared statement. */
  async byName(name: string): Promise<SandboxRecord | undefined> {
    const row = await this.sql.first<Selectable<SandboxTable>>('select * from "sandboxes" where "name" = ?', [name]);
    return row && codec.fromRow(row);
  }

  async byUuid(uuid: string): Promise<SandboxRecord | undefined> {
    const row = await this.sql.first<Selectable<SandboxTable>>('select * from "sandboxes" where "uuid" = ?', [uuid]);
    return row && codec.fromRow(row);
  }

  /** All sandboxes, oldest first. */
  async all(): Promise<SandboxRecord[]> {
    const rows = await this.db.selectFrom('sandboxes').selectAll().orderBy('created_at').orderBy('name').execute();
    return rows.map((row) => codec.fromRow(row));
  }

  /** How many sandboxes exist (in-flight creates included, so limits hold under races). */
  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('sandboxes')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '!=', 'removing')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Applies a patch atomically. With `from`, only when the stored status is one of those;
   * returns false when nothing matched.
   */
  async update(uuid: string, patch: Patch, from?: readonly SandboxStatus[]): Promise<boolean> {
    // One prepared statement per shape (columns set, statuses allowed): every exec touches
    // last_activity_at through here. Only the table's own columns get into the SQL: an object
    // passed at run time may hold more fields than its type says.
    const row = codec.toColumns(patch);
    const columns = Object.keys(row);
    if (columns.length === 0) throw new Error('sandbox update without a field to set');
    this.columns ??= this.sql.columns('sandboxes').then((names) => new Set(names));
    const known = await this.columns;
    const unknown = columns.find((column) => !known.has(column));
    if (unknown !== undefined) throw new Error(`sandbox update of an unknown column '${unknown}'`);
    const sql =
      `update "sandboxes" set ${assignments(columns)} where "uuid" = ?` + (from ? ` and "status" in (${placeholders(from.length)})` : '');
    return (await this.sql.run(sql, [...Object.values(row), uuid, ...(from ?? [])])) === 1;
  }

  async delete(uuid: string): Promise<void> {
    await this.db.deleteFrom('sandboxes').where('uuid', '=', uuid).execute();
  }
}
