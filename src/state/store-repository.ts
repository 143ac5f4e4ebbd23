import type { Kysely } from 'kysely';
import type { StoreKind } from '../domain/store-kinds.js';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, StoreTable } from './schema.js';

/** How the last use of an external store went (embedded stores stay `ok`). */
export type StoreStatus = 'ok' | 'unreachable';

/** A store as kept; field names are the column names. `secret` is ciphertext, never a password. */
export interface StoreRecord extends Decoded<StoreTable, { kind: StoreKind; config: Record<string, unknown>; status: StoreStatus }> {}

const codec = new RowCodec<StoreTable, StoreRecord>(['config']);

/** Durable stores in the state store. */
export class StoreRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a store; a taken name fails with SQLITE_CONSTRAINT_UNIQUE. */
  async insert(record: StoreRecord): Promise<void> {
    await this.db.insertInto('stores').values(codec.toRow(record)).execute();
  }

  async byId(id: string): Promise<StoreRecord | undefined> {
    const row = await this.db.selectFrom('stores').selectAll().where('id', '=', id).executeTakeFirst();
    return row && codec.fromRow(row);
  }

  async byName(name: string): Promise<StoreRecord | undefined> {
    const row = await this.db.selectFrom('stores').selectAll().where('name', '=', name).executeTakeFirst();
    return row && codec.fromRow(row);
  }

  /** Stores in name order; `sandbox` is the bound sandbox's name. */
  async list(filter: { kind?: StoreKind; sandbox?: string } = {}): Promise<StoreRecord[]> {
    let query = this.db.selectFrom('stores').selectAll();
    if (filter.kind) query = query.where('kind', '=', filter.kind);
    if (filter.sandbox) query = query.where('sandbox', '=', filter.sandbox);
    const rows = await query.orderBy('name').execute();
    return rows.map((row) => codec.fromRow(row));
  }

  /** The stores bound to the sandbox with this uuid. */
  async boundTo(sandboxUuid: string): Promise<StoreRecord[]> {
    const rows = await this.db.selectFrom('stores').selectAll().where('sandbox_uuid', '=', sandboxUuid).orderBy('name').execute();
    return rows.map((row) => codec.fromRow(row));
  }

  /** Writes the given fields; `secret: null` clears the password. */
  async update(id: string, fields: Partial<Omit<StoreRecord, 'id'>>): Promise<void> {
    const columns = codec.toColumns(fields);
    if (fields.secret === null) columns.secret = null;
    await this.db.updateTable('stores').set(columns).where('id', '=', id).execute();
  }

  /** Deletes a store's record; true when there was one. */
  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('stores').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
