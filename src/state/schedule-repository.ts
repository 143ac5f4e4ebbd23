import type { Kysely } from 'kysely';
import { RowCodec, type Decoded } from './row-codec.js';
import type { Database, ScheduleRunTable, ScheduleTable } from './schema.js';
import type { Sql } from './sql.js';

/** What a schedule is doing: firing, held, or done for good. */
export type ScheduleStatus = 'active' | 'paused' | 'completed' | 'failed';
/** How one run of a schedule went (`running` until it ends). */
export type RunStatus = 'running' | 'succeeded' | 'failed' | 'skipped' | 'missed' | 'interrupted';

/** A schedule as stored; field names are the column names. */
export interface ScheduleRecord
  extends Decoded<
    ScheduleTable,
    {
      args: Record<string, unknown>;
      status: ScheduleStatus;
      overlap: 'skip' | 'allow';
      misfire: 'fire_once' | 'skip';
      last_run_status: RunStatus | null;
    }
  > {}

/** A run as stored; `result` is the target's JSON result. */
export interface RunRecord extends Decoded<ScheduleRunTable, { status: RunStatus; result: unknown }> {}

/** What a claim writes to its schedule besides moving next_fire_at. */
export interface ClaimUpdate {
  next_fire_at: string | null;
  status: ScheduleStatus;
  /** Set when the claim fires the target (not for a claim that only records skipped or missed). */
  last_fired_at?: string;
  fire_count_increment: number;
  last_run_status?: RunStatus;
  updated_at: string;
}

/** How a run ended, and what its schedule becomes with it. */
export interface RunEnd {
  status: Exclude<RunStatus, 'running'>;
  finished_at: string;
  duration_ms: number | null;
  result: unknown;
  error: string | null;
  orchestration_id?: string | null;
}

/** Runs kept per schedule: older finished ones are deleted as new ones come. */
export const RUNS_KEPT = 100;

const codec = new RowCodec<ScheduleTable, ScheduleRecord>(['args']);
const runCodec = new RowCodec<ScheduleRunTable, RunRecord>(['result']);

/**
 * Schedules and their runs. The hot path (due times, the claim, a run's end) uses prepared
 * statements in transactions, so that a claim and its run rows commit together and nothing
 * interleaves; the rest goes through Kysely.
 */
export class ScheduleRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly sql: Sql,
  ) {}

  async insert(record: ScheduleRecord): Promise<void> {
    await this.db.insertInto('schedules').values(codec.toRow(record)).execute();
  }

  async byId(id: string): Promise<ScheduleRecord | undefined> {
    const row = await this.db.selectFrom('schedules').selectAll().where('id', '=', id).executeTakeFirst();
    return row && codec.fromRow(row);
  }

  async byName(name: string): Promise<ScheduleRecord | undefined> {
    const row = await this.db.selectFrom('schedules').selectAll().where('name', '=', name).executeTakeFirst();
    return row && codec.fromRow(row);
  }

  /** Schedules in name order, filtered. */
  async list(filter: { status?: ScheduleStatus; target_class?: string; limit: number }): Promise<ScheduleRecord[]> {
    let query = this.db.selectFrom('schedules').selectAll();
    if (filter.status) query = query.where('status', '=', filter.status);
    if (filter.target_class) query = query.where('target_class', '=', filter.target_class);
    const rows = await query.orderBy('name').limit(filter.limit).execute();
    return rows.map((row) => codec.fromRow(row));
  }

  /** Writes the given fields of a schedule. */
  async update(id: string, fields: Partial<ScheduleRecord>): Promise<void> {
    await this.db.updateTable('schedules').set(codec.toColumns(fields)).where('id', '=', id).execute();
  }

  /** Pauses a schedule whatever its state (a schedule the firing cannot plan). */
  async pause(id: string, now: string): Promise<void> {
    await this.sql.run("UPDATE schedules SET status = 'paused', next_fire_at = NULL, updated_at = ? WHERE id = ?", [now, id]);
  }

  /** How many schedules there are. */
  async count(): Promise<number> {
    return (await this.sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM schedules'))?.n ?? 0;
  }

  /** Deletes a schedule and its runs in one transaction. */
  async delete(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.run('DELETE FROM schedule_runs WHERE schedule_id = ?', [id]);
      await tx.run('DELETE FROM schedules WHERE id = ?', [id]);
    });
  }

  /** The earliest next_fire_at of the active schedules. */
  async nextDue(): Promise<string | null> {
    const row = await this.sql.first<{ due: string | null }>("SELECT MIN(next_fire_at) AS due FROM schedules WHERE status = 'active' AND next_fire_at IS NOT NULL");
    return row?.due ?? null;
  }

  /** Active schedules due at `now` (an RFC 3339 UTC text), earliest first. */
  async due(now: string, limit: number): Promise<ScheduleRecord[]> {
    const rows = await this.sql.all<ScheduleTable>(
      "SELECT * FROM schedules WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?",
      [now, limit],
    );
    return rows.map((row) => codec.fromRow(row));
  }

  /**
   * The claim: in one transaction, moves the schedule's next_fire_at from `expected` (the
   * conditional UPDATE: it changes nothing when another claim moved it first, or the schedule
   * is no longer active) and inserts the runs `decide` plans. `decide` is told whether a run of
   * the schedule is in flight (for the overlap policy). Returns the runs inserted; none when
   * another claim won.
   */
  claim(id: string, expected: string, decide: (running: boolean) => { update: ClaimUpdate; runs: RunRecord[] }): Promise<RunRecord[]> {
    return this.sql.transaction(async (tx) => {
      const { update, runs } = decide(await this.hasRunning(tx, id));
      const changed = await tx.run(
        `UPDATE schedules SET next_fire_at = ?, status = ?, last_fired_at = COALESCE(?, last_fired_at),
           fire_count = fire_count + ?, last_run_status = COALESCE(?, last_run_status), updated_at = ?
         WHERE id = ? AND next_fire_at = ? AND status = 'active'`,
        [update.next_fire_at, update.status, update.last_fired_at ?? null, update.fire_count_increment, update.last_run_status ?? null, update.updated_at, id, expected],
      );
      if (changed === 0) return [];
      for (const run of runs) await this.insertRunNow(tx, run);
      await this.prune(tx, id);
      return runs;
    });
  }

  /** Inserts one run (a manual trigger's) outside a claim, and counts it in `trigger_count`. */
  async insertRun(run: RunRecord): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await this.insertRunNow(tx, run);
      if (run.manual) await tx.run('UPDATE schedules SET trigger_count = trigger_count + 1 WHERE id = ?', [run.schedule_id]);
      await this.prune(tx, run.schedule_id);
    });
  }

  /**
   * Records a run's end and, in the same transaction, its schedule's `last_run_status` and the
   * status `decide` gives from the schedule's current one (a one-shot completes or fails with its
   * run; a manual run changes no status). False when the run had ended already or is gone with
   * its schedule.
   */
  finishRun(run: RunRecord, end: RunEnd, decide: (current: ScheduleStatus) => ScheduleStatus | undefined): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const changed = await tx.run(
        `UPDATE schedule_runs SET status = ?, finished_at = ?, duration_ms = ?, result = ?, error = ?,
           orchestration_id = COALESCE(?, orchestration_id) WHERE id = ? AND status = 'running'`,
        [
          end.status,
          end.finished_at,
          end.duration_ms,
          end.result === undefined || end.result === null ? null : JSON.stringify(end.result),
          end.error,
          end.orchestration_id ?? null,
          run.id,
        ],
      );
      if (changed === 0) return false;
      const current = await tx.first<{ status: ScheduleStatus }>('SELECT status FROM schedules WHERE id = ?', [run.schedule_id]);
      if (!current) return true;
      const status = run.manual ? undefined : decide(current.status);
      await tx.run('UPDATE schedules SET last_run_status = ?, status = ?, updated_at = CASE WHEN ? = 1 THEN ? ELSE updated_at END WHERE id = ?', [
        end.status,
        status ?? current.status,
        status && status !== current.status ? 1 : 0,
        end.finished_at,
        run.schedule_id,
      ]);
      return true;
    });
  }

  /** Marks a run to be tried again (recovery's retry of an object-method run). */
  async retryRun(id: string): Promise<void> {
    await this.sql.run("UPDATE schedule_runs SET attempt = attempt + 1 WHERE id = ? AND status = 'running'", [id]);
  }

  /** Every run still marked running (at start: the runs a stopped server had in flight). */
  async runningRuns(): Promise<RunRecord[]> {
    const rows = await this.sql.all<ScheduleRunTable>("SELECT * FROM schedule_runs WHERE status = 'running' ORDER BY id");
    return rows.map((row) => runCodec.fromRow(row));
  }

  async runById(id: string): Promise<RunRecord | undefined> {
    const row = await this.db.selectFrom('schedule_runs').selectAll().where('id', '=', id).executeTakeFirst();
    return row && runCodec.fromRow(row);
  }

  /** A schedule's runs, newest first. */
  async runs(scheduleId: string, filter: { status?: RunStatus; limit: number }): Promise<RunRecord[]> {
    let query = this.db.selectFrom('schedule_runs').selectAll().where('schedule_id', '=', scheduleId);
    if (filter.status) query = query.where('status', '=', filter.status);
    const rows = await query.orderBy('id', 'desc').limit(filter.limit).execute();
    return rows.map((row) => runCodec.fromRow(row));
  }

  private async hasRunning(tx: Sql, scheduleId: string): Promise<boolean> {
    return (await tx.first("SELECT 1 AS one FROM schedule_runs WHERE schedule_id = ? AND status = 'running' AND manual = 0 LIMIT 1", [scheduleId])) !== undefined;
  }

  private async insertRunNow(tx: Sql, run: RunRecord): Promise<void> {
    await tx.run(
      `INSERT INTO schedule_runs (id, schedule_id, scheduled_for, started_at, finished_at, status, missed_count, duration_ms,
         result, error, orchestration_id, attempt, manual) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        run.id,
        run.schedule_id,
        run.scheduled_for,
        run.started_at,
        run.finished_at,
        run.status,
        run.missed_count,
        run.duration_ms,
        run.result === undefined || run.result === null ? null : JSON.stringify(run.result),
        run.error,
        run.orchestration_id,
        run.attempt,
        run.manual,
      ],
    );
  }

  /** Keeps the newest RUNS_KEPT runs of a schedule (a run in flight is never deleted). */
  private async prune(tx: Sql, scheduleId: string): Promise<void> {
    await tx.run(
      `DELETE FROM schedule_runs WHERE schedule_id = ? AND status != 'running' AND id NOT IN
         (SELECT id FROM schedule_runs WHERE schedule_id = ? ORDER BY id DESC LIMIT ?)`,
      [scheduleId, scheduleId, RUNS_KEPT],
    );
  }
}
