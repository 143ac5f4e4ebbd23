import { sql, type Kysely } from 'kysely';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, ObjectCallTable, ObjectClassTable, ObjectTable } from './schema.js';
import { assignments, insertStatement, retryUniqueViolation, type Sql } from './sql.js';

export type ObjectRuntime = 'node' | 'python';
export type ObjectStatus = 'active' | 'hibernating';
export type ObjectCallOutcome = 'ok' | 'threw' | 'timeout' | 'error';

/** A registered class as stored; field names are the column names. */
export interface ObjectClassRecord
  extends Decoded<
    ObjectClassTable,
    { runtime: ObjectRuntime; handlers: Record<string, string> | null; setup: string[] | null; methods: string[] | null; profile: 'permissive' | 'moderate' | 'restrictive' }
  > {}

/** An object as stored. */
export interface ObjectRecord extends Decoded<ObjectTable, { status: ObjectStatus; storage: Record<string, unknown>; alarm_args: unknown }> {}

export interface ObjectCallRecord extends Decoded<ObjectCallTable, { outcome: ObjectCallOutcome }> {}

/** The alarm of an object, as set by a call or by the alarm route. */
export interface AlarmSetting {
  at: string;
  method: string;
  args: unknown;
}

/**
 * What a finished call changes, written in one transaction: the storage (when the method
 * wrote), the alarm (when it set or deleted one, or when the call was that alarm's firing), the
 * call record and the result kept for its idempotency key.
 */
export interface CallCommit {
  object: string;
  now: string;
  /** The storage after the call and its size; absent when the method wrote nothing. */
  storage?: { value: Record<string, unknown>; bytes: number };
  /** A new alarm (set), null (deleted), or absent (unchanged). */
  alarm?: AlarmSetting | null;
  /**
   * The alarm this call fired (its `alarm_at`): cleared unless `alarm` sets another; left
   * alone when the object's alarm has changed since.
   */
  fired_alarm_at?: string;
  call: ObjectCallRecord;
  idempotency?: { key: string; result: string | null; request_hash: string };
}

/** Calls kept per object. */
export const CALL_LOG_SIZE = 100;
/** How long a result is kept for its idempotency key. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

const classCodec = new RowCodec<ObjectClassTable, ObjectClassRecord>(['handlers', 'setup', 'methods']);
const objectCodec = new RowCodec<ObjectTable, ObjectRecord>(['storage', 'alarm_args']);
const callCodec = new RowCodec<ObjectCallTable, ObjectCallRecord>([]);

/** Durable-object classes, objects, call logs and idempotency results in the state store. */
export class ObjectRepository {
  constructor(
    private readonly db: Kysely<Database>,
    /** The statements of every call (the object's row, the commit), prepared once. */
    private readonly sql: Sql,
  ) {}

  // --- classes ---------------------------------------------------------------------------

  async putClass(record: ObjectClassRecord): Promise<void> {
    const row = classCodec.toRow(record);
    await this.db
      .insertInto('object_classes')
      .values(row)
      .onConflict((c) => c.column('name').doUpdateSet(row))
      .execute();
  }

  /** Every call reads its class (twice: before and after it waits for the object): a prepared statement. */
  async getClass(name: string): Promise<ObjectClassRecord | undefined> {
    const row = await this.sql.first<ObjectClassTable>('SELECT * FROM object_classes WHERE name = ?', [name]);
    return row && classCodec.fromRow(row);
  }

  async listClasses(): Promise<ObjectClassRecord[]> {
    const rows = await this.db.selectFrom('object_classes').selectAll().orderBy('name').execute();
    return rows.map((row) => classCodec.fromRow(row));
  }

  /** Records the methods the class's module exports (of the version described). */
  async setMethods(name: string, version: number, methods: string[]): Promise<void> {
    await this.db
      .updateTable('object_classes')
      .set({ methods: JSON.stringify(methods) })
      .where('name', '=', name)
      .where('version', '=', version)
      .execute();
  }

  async deleteClass(name: string): Promise<void> {
    await this.db.deleteFrom('object_classes').where('name', '=', name).execute();
  }

  /** Objects per class name. */
  async countByClass(): Promise<Map<string, number>> {
    const rows = await this.db.selectFrom('objects').select(['class', sql<number>`count(*)`.as('n')]).groupBy('class').execute();
    return new Map(rows.map((row) => [row.class, Number(row.n)]));
  }

  // --- objects ---------------------------------------------------------------------------

  /**
   * Inserts an object with the next uid number (the highest plus one, as SQLite numbers rows);
   * false when (class, object_id) exists already. On PostgreSQL two inserts at once may take the
   * same number: the one the unique index refuses takes the next.
   */
  async insert(record: ObjectRecord): Promise<boolean> {
    const row = { ...objectCodec.toRow(record), uid_number: sql<number>`(SELECT COALESCE(MAX(uid_number), 0) + 1 FROM objects)` };
    const result = await retryUniqueViolation(() =>
      this.db
        .insertInto('objects')
        .values(row)
        .onConflict((c) => c.columns(['class', 'object_id']).doNothing())
        .executeTakeFirst(),
    );
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async byId(id: string): Promise<ObjectRecord | undefined> {
    const row = await this.sql.first<ObjectTable>('SELECT * FROM objects WHERE id = ?', [id]);
    return row && objectCodec.fromRow(row);
  }

  async byName(className: string, objectId: string): Promise<ObjectRecord | undefined> {
    const row = await this.sql.first<ObjectTable>('SELECT * FROM objects WHERE class = ? AND object_id = ?', [className, objectId]);
    return row && objectCodec.fromRow(row);
  }

  /**
   * The object's uid number: unique among the objects that exist (a new object may take the
   * number of the last one deleted). Bound objects run as their own uid from it.
   */
  async rowNumber(id: string): Promise<number | undefined> {
    const row = await this.sql.first<{ uid_number: number | null }>('SELECT uid_number FROM objects WHERE id = ?', [id]);
    return row?.uid_number ?? undefined;
  }

  async list(filter: { class?: string; status?: ObjectStatus; limit: number }): Promise<ObjectRecord[]> {
    let query = this.db.selectFrom('objects').selectAll();
    if (filter.class) query = query.where('class', '=', filter.class);
    if (filter.status) query = query.where('status', '=', filter.status);
    const rows = await query.orderBy('id').limit(filter.limit).execute();
    return rows.map((row) => objectCodec.fromRow(row));
  }

  /** Objects that run in sandbox `name` (its managed object, or those bound to it). */
  async bySandbox(name: string): Promise<ObjectRecord[]> {
    const rows = await this.db.selectFrom('objects').selectAll().where('sandbox', '=', name).execute();
    return rows.map((row) => objectCodec.fromRow(row));
  }

  async active(): Promise<ObjectRecord[]> {
    const rows = await this.db.selectFrom('objects').selectAll().where('status', '=', 'active').execute();
    return rows.map((row) => objectCodec.fromRow(row));
  }

  async countActive(): Promise<number> {
    const row = await this.db.selectFrom('objects').select(sql<number>`count(*)`.as('n')).where('status', '=', 'active').executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async setStatus(id: string, status: ObjectStatus, now: string): Promise<void> {
    await this.db.updateTable('objects').set({ status, updated_at: now }).where('id', '=', id).execute();
  }

  /** Replaces the whole storage (PATCH). */
  async replaceStorage(id: string, storage: Record<string, unknown>, bytes: number, now: string): Promise<void> {
    await this.db
      .updateTable('objects')
      .set({ storage: JSON.stringify(storage), storage_bytes: bytes, updated_at: now })
      .where('id', '=', id)
      .execute();
  }

  /** Removes an object with its call log and idempotency results. */
  async delete(id: string): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('object_calls').where('object', '=', id).execute();
      await tx.deleteFrom('object_idempotency').where('object', '=', id).execute();
      await tx.deleteFrom('objects').where('id', '=', id).execute();
    });
  }

  // --- alarms ----------------------------------------------------------------------------

  /** Sets (replaces) or clears an object's alarm; attempts start again. */
  async setAlarm(id: string, alarm: AlarmSetting | null, now: string): Promise<void> {
    await this.db.updateTable('objects').set({ ...alarmColumns(alarm), updated_at: now }).where('id', '=', id).execute();
  }

  /** The earliest time an alarm is due, leaving out objects whose alarm is being fired. */
  async nextAlarm(excluded: ReadonlySet<string>): Promise<string | undefined> {
    let query = this.db.selectFrom('objects').select('alarm_retry_at').where('alarm_retry_at', 'is not', null);
    if (excluded.size > 0) query = query.where('id', 'not in', [...excluded]);
    const row = await query.orderBy('alarm_retry_at').limit(1).executeTakeFirst();
    return row?.alarm_retry_at ?? undefined;
  }

  /** Objects whose alarm is due at `now`, earliest first. */
  async dueAlarms(now: string, limit: number): Promise<ObjectRecord[]> {
    const rows = await this.db
      .selectFrom('objects')
      .selectAll()
      .where('alarm_retry_at', 'is not', null)
      .where('alarm_retry_at', '<=', now)
      .orderBy('alarm_retry_at')
      .limit(limit)
      .execute();
    return rows.map((row) => objectCodec.fromRow(row));
  }

  /**
   * After a failed firing of the alarm due at `alarmAt`: counts the attempt and sets the next
   * try, or (retry null) gives the alarm up and keeps the error. Nothing changes when the alarm
   * was replaced meanwhile.
   */
  async alarmFailed(id: string, alarmAt: string, error: string, retryAt: string | null, now: string): Promise<void> {
    const update = retryAt
      ? { alarm_attempts: sql<number>`alarm_attempts + 1`, alarm_retry_at: retryAt, last_alarm_error: error, updated_at: now }
      : { ...alarmColumns(null), last_alarm_error: error, updated_at: now };
    await this.db.updateTable('objects').set(update).where('id', '=', id).where('alarm_at', '=', alarmAt).execute();
  }

  // --- calls -----------------------------------------------------------------------------

  /** Applies a finished call: storage, alarm, call record and idempotency result, in one transaction. */
  async commit(commit: CallCommit): Promise<void> {
    await this.sql.transaction(async (tx) => {
      const set: Record<string, unknown> = { last_call_at: commit.now, updated_at: commit.now };
      if (commit.storage) Object.assign(set, { storage: JSON.stringify(commit.storage.value), storage_bytes: commit.storage.bytes });
      if (commit.alarm !== undefined) Object.assign(set, alarmColumns(commit.alarm));
      await tx.run(`UPDATE objects SET call_count = call_count + 1, ${assignments(Object.keys(set))} WHERE id = ?`, [...Object.values(set), commit.object]);
      if (commit.alarm === undefined && commit.fired_alarm_at !== undefined) {
        const cleared = alarmColumns(null);
        await tx.run(`UPDATE objects SET ${assignments(Object.keys(cleared))} WHERE id = ? AND alarm_at = ?`, [
          ...Object.values(cleared),
          commit.object,
          commit.fired_alarm_at,
        ]);
      }
      await recordCall(tx, commit.call);
      if (commit.idempotency) {
        const { key, result, request_hash } = commit.idempotency;
        await tx.run(
          'INSERT INTO object_idempotency (object, key, result, result_kept, created_at, request_hash) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (object, key) DO NOTHING',
          [commit.object, key, result, result === null ? 0 : 1, commit.now, request_hash],
        );
      }
    });
  }

  /** Records a call that changed nothing (it failed) and counts it. */
  async recordFailedCall(call: ObjectCallRecord, now: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.run('UPDATE objects SET last_call_at = ?, call_count = call_count + 1 WHERE id = ?', [now, call.object]);
      await recordCall(tx, call);
    });
  }

  /** The object's latest calls, newest first. */
  async calls(id: string, limit: number): Promise<ObjectCallRecord[]> {
    const rows = await this.db.selectFrom('object_calls').selectAll().where('object', '=', id).orderBy('call_id', 'desc').limit(limit).execute();
    return rows.map((row) => callCodec.fromRow(row));
  }

  /** The kept outcome of a call with this key, if it is younger than `since`. */
  async idempotent(id: string, key: string, since: string): Promise<{ result: string | null; request_hash: string | null } | undefined> {
    const row = await this.db
      .selectFrom('object_idempotency')
      .select(['result', 'result_kept', 'request_hash'])
      .where('object', '=', id)
      .where('key', '=', key)
      .where('created_at', '>=', since)
      .executeTakeFirst();
    return row && { result: row.result_kept ? row.result : null, request_hash: row.request_hash };
  }

  /** Forgets idempotency results older than `before`. */
  async pruneIdempotency(before: string): Promise<void> {
    await this.db.deleteFrom('object_idempotency').where('created_at', '<', before).execute();
  }
}

/** Keeps a call in the object's log, which holds its newest CALL_LOG_SIZE calls (call ids are UUIDv7: they sort by time). */
async function recordCall(tx: Sql, call: ObjectCallRecord): Promise<void> {
  const row = callCodec.toRow(call);
  await tx.run(insertStatement('object_calls', Object.keys(row)), Object.values(row));
  await tx.run('DELETE FROM object_calls WHERE object = ? AND call_id < (SELECT call_id FROM object_calls WHERE object = ? ORDER BY call_id DESC LIMIT 1 OFFSET ?)', [
    call.object,
    call.object,
    CALL_LOG_SIZE - 1,
  ]);
}

/** The alarm columns for a new alarm (attempts from zero) or for none. */
function alarmColumns(alarm: AlarmSetting | null) {
  return alarm
    ? { alarm_at: alarm.at, alarm_method: alarm.method, alarm_args: JSON.stringify(alarm.args ?? {}), alarm_attempts: 0, alarm_retry_at: alarm.at, last_alarm_error: null }
    : { alarm_at: null, alarm_method: null, alarm_args: null, alarm_attempts: 0, alarm_retry_at: null };
}
