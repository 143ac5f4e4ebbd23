import { RowCodec, type Decoded } from './row-codec.js';
import type { OrchestrationDefinitionTable, OrchestrationHistoryTable, OrchestrationTable, OrchestrationTaskTable } from './schema.js';
import { assignments, insertStatement, type Sql } from './sql.js';

/** The statuses of an instance (the interpreter's). */
export type InstanceRowStatus = 'pending' | 'running' | 'waiting' | 'completed' | 'failed' | 'terminated';

/**
 * A definition as stored; `content` is the validated DSL (the service's Definition: the state
 * layer does not know the interpreter's types, so JSON columns are `Content` here).
 */
export interface DefinitionRecord<Content = unknown> extends Decoded<OrchestrationDefinitionTable, { content: Content }> {}

/** An instance as stored; field names are the column names. */
export interface InstanceRecord<Content = unknown>
  extends Decoded<OrchestrationTable, { definition: Content; status: InstanceRowStatus; input: unknown; output: unknown }> {}

/** An open activity attempt: what a restart runs again (scheduled) or reports interrupted (running). */
export interface TaskRecord<Command = unknown> extends Decoded<OrchestrationTaskTable, { state: 'scheduled' | 'running'; command: Command }> {}

/** One history event as stored (`data` parsed). */
export interface HistoryRow {
  sequence: number;
  type: string;
  step: string | null;
  data: unknown;
  timestamp: string;
}

/** A due timer row of an instance. */
export interface TimerRow {
  instance: string;
  step: string;
  fire_at: string;
}

/** What one transition writes besides its history events. */
export interface TransitionWrite {
  status: InstanceRowStatus;
  /** The instance's open activity attempts and due times after the decision: its rows are replaced by these. */
  tasks: readonly Omit<TaskRecord, 'instance'>[];
  timers: readonly Omit<TimerRow, 'instance'>[];
  updated_at: string;
  /** Set when the transition starts or finishes the instance. */
  fields?: Partial<Pick<InstanceRecord, 'output' | 'error' | 'failed_step' | 'started_at' | 'completed_at' | 'start_at'>>;
}

const definitionCodec = new RowCodec<OrchestrationDefinitionTable, DefinitionRecord>(['content']);
const instanceCodec = new RowCodec<OrchestrationTable, InstanceRecord>(['definition', 'input', 'output']);
const taskCodec = new RowCodec<OrchestrationTaskTable, TaskRecord>(['command']);

const FINISHED = "('completed', 'failed', 'terminated')";
const INSTANCE_COLUMNS = [
  'id', 'name', 'definition_version', 'definition', 'status', 'input', 'output', 'error', 'failed_step', 'caller_key',
  'start_at', 'created_at', 'updated_at', 'started_at', 'completed_at',
] as const;

/**
 * Orchestration definitions, instances, their histories and open work, as prepared statements:
 * a transition's events, task and timer rows and instance status commit in one transaction
 * (nothing interleaves), which is what makes a transition happen exactly once across a kill -9.
 */
export class OrchestrationRepository {
  constructor(private readonly sql: Sql) {}

  async definition(name: string): Promise<DefinitionRecord | undefined> {
    const row = await this.sql.first<OrchestrationDefinitionTable>('SELECT * FROM orchestration_definitions WHERE name = ?', [name]);
    return row && definitionCodec.fromRow(row);
  }

  async definitions(): Promise<DefinitionRecord[]> {
    const rows = await this.sql.all<OrchestrationDefinitionTable>('SELECT * FROM orchestration_definitions ORDER BY name');
    return rows.map((row) => definitionCodec.fromRow(row));
  }

  /** Inserts or replaces a definition. */
  async saveDefinition(record: DefinitionRecord): Promise<void> {
    const row = definitionCodec.toRow(record);
    await this.sql.run(
      'INSERT INTO orchestration_definitions (name, version, content, hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (name) DO UPDATE SET version = excluded.version, content = excluded.content, hash = excluded.hash, created_at = excluded.created_at, updated_at = excluded.updated_at',
      [row.name, row.version, row.content, row.hash, row.created_at, row.updated_at],
    );
  }

  async deleteDefinition(name: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM orchestration_definitions WHERE name = ?', [name])) > 0;
  }

  async instance(id: string): Promise<InstanceRecord | undefined> {
    const row = await this.sql.first<OrchestrationTable>('SELECT * FROM orchestrations WHERE id = ?', [id]);
    return row && instanceCodec.fromRow(row);
  }

  async byCallerKey(key: string): Promise<InstanceRecord | undefined> {
    const row = await this.sql.first<OrchestrationTable>('SELECT * FROM orchestrations WHERE caller_key = ?', [key]);
    return row && instanceCodec.fromRow(row);
  }

  /** Instances newest first (UUIDv7 ids sort by creation; caller-chosen ids by their text). */
  async list(filter: { status?: string; name?: string; before?: string; limit: number }): Promise<InstanceRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.status) (where.push('status = ?'), args.push(filter.status));
    if (filter.name) (where.push('name = ?'), args.push(filter.name));
    if (filter.before) (where.push('(created_at, id) < (SELECT created_at, id FROM orchestrations WHERE id = ?)'), args.push(filter.before));
    const text = `SELECT * FROM orchestrations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`;
    const rows = await this.sql.all<OrchestrationTable>(text, [...args, filter.limit]);
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** Instances not finished, oldest first (the restart's re-arm). */
  async unfinished(): Promise<InstanceRecord[]> {
    const rows = await this.sql.all<OrchestrationTable>(`SELECT * FROM orchestrations WHERE status NOT IN ${FINISHED} ORDER BY created_at, id`);
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** The last sequence of an instance's history (0 for none): what a kept state is checked against. */
  async lastSequence(id: string): Promise<number> {
    const row = await this.sql.first<{ last: number | null }>('SELECT max(sequence) AS last FROM orchestration_history WHERE instance = ?', [id]);
    return row?.last ?? 0;
  }

  async history(id: string): Promise<HistoryRow[]> {
    const rows = await this.sql.all<Omit<OrchestrationHistoryTable, 'instance'>>(
      'SELECT sequence, type, step, data, timestamp FROM orchestration_history WHERE instance = ? ORDER BY sequence',
      [id],
    );
    return rows.map((row) => ({ ...row, data: JSON.parse(row.data) as unknown }));
  }

  async tasks(id: string): Promise<TaskRecord[]> {
    const rows = await this.sql.all<OrchestrationTaskTable>('SELECT * FROM orchestration_tasks WHERE instance = ? ORDER BY step', [id]);
    return rows.map((row) => taskCodec.fromRow(row));
  }

  timers(id: string): Promise<TimerRow[]> {
    return this.sql.all('SELECT * FROM orchestration_timers WHERE instance = ? ORDER BY fire_at, step', [id]);
  }

  /**
   * Inserts a new instance and its first transition in one transaction; a taken id or caller
   * key fails with the engine's unique violation (the caller holds the id's lock and looked first).
   */
  async create(record: InstanceRecord, events: readonly HistoryRow[], write: TransitionWrite): Promise<void> {
    await this.sql.transaction(async (tx) => {
      const row = instanceCodec.toRow(record);
      await tx.run(
        insertStatement('orchestrations', INSTANCE_COLUMNS),
        INSTANCE_COLUMNS.map((column) => row[column] ?? null),
      );
      await applyTransition(tx, record.id, events, write);
    });
  }

  /** Commits one transition: events appended, task and timer rows rebuilt, status and fields set. */
  async commit(id: string, events: readonly HistoryRow[], write: TransitionWrite): Promise<void> {
    await this.sql.transaction((tx) => applyTransition(tx, id, events, write));
  }

  /** Deletes an instance and everything it has, in one transaction. */
  async deleteInstance(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      for (const table of ['orchestration_history', 'orchestration_tasks', 'orchestration_timers']) {
        await tx.run(`DELETE FROM ${table} WHERE instance = ?`, [id]);
      }
      await tx.run('DELETE FROM orchestrations WHERE id = ?', [id]);
    });
  }

  /** The earliest timer row, pending start or retention purge due; null when none. */
  async nextDue(retentionMs: number): Promise<string | null> {
    const timer = (await this.sql.first<{ due: string | null }>('SELECT MIN(fire_at) AS due FROM orchestration_timers'))?.due ?? null;
    const start = (await this.sql.first<{ due: string | null }>("SELECT MIN(start_at) AS due FROM orchestrations WHERE status = 'pending'"))?.due ?? null;
    const finished = (await this.sql.first<{ done: string | null }>(`SELECT MIN(completed_at) AS done FROM orchestrations WHERE status IN ${FINISHED}`))?.done ?? null;
    const purge = finished === null ? null : new Date(Date.parse(finished) + retentionMs).toISOString();
    const candidates = [timer, start, purge].filter((due): due is string => due !== null);
    return candidates.length === 0 ? null : candidates.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b));
  }

  /** Timer rows due at `now`, earliest first. */
  dueTimers(now: string, limit: number): Promise<TimerRow[]> {
    return this.sql.all('SELECT * FROM orchestration_timers WHERE fire_at <= ? ORDER BY fire_at LIMIT ?', [now, limit]);
  }

  /** Pending instances whose start_at has come. */
  async dueStarts(now: string, limit: number): Promise<InstanceRecord[]> {
    const rows = await this.sql.all<OrchestrationTable>(
      "SELECT * FROM orchestrations WHERE status = 'pending' AND start_at IS NOT NULL AND start_at <= ? ORDER BY start_at LIMIT ?",
      [now, limit],
    );
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** Finished instances completed before `cutoff`. */
  async expired(cutoff: string, limit: number): Promise<string[]> {
    const rows = await this.sql.all<{ id: string }>(`SELECT id FROM orchestrations WHERE status IN ${FINISHED} AND completed_at < ? ORDER BY completed_at LIMIT ?`, [
      cutoff,
      limit,
    ]);
    return rows.map((row) => row.id);
  }
}

/** One transition's writes, inside the caller's transaction. */
async function applyTransition(tx: Sql, id: string, events: readonly HistoryRow[], write: TransitionWrite): Promise<void> {
  for (const event of events) {
    await tx.run('INSERT INTO orchestration_history (instance, sequence, type, step, data, timestamp) VALUES (?, ?, ?, ?, ?, ?)', [
      id,
      event.sequence,
      event.type,
      event.step,
      JSON.stringify(event.data),
      event.timestamp,
    ]);
  }
  await tx.run('DELETE FROM orchestration_tasks WHERE instance = ?', [id]);
  await tx.run('DELETE FROM orchestration_timers WHERE instance = ?', [id]);
  for (const task of write.tasks) {
    await tx.run('INSERT INTO orchestration_tasks (instance, step, attempt, state, command) VALUES (?, ?, ?, ?, ?)', [id, task.step, task.attempt, task.state, JSON.stringify(task.command)]);
  }
  for (const timer of write.timers) {
    await tx.run('INSERT INTO orchestration_timers (instance, step, fire_at) VALUES (?, ?, ?) ON CONFLICT (instance, step) DO UPDATE SET fire_at = excluded.fire_at', [
      id,
      timer.step,
      timer.fire_at,
    ]);
  }
  const fields = instanceCodec.toColumns({ ...write.fields, status: write.status, updated_at: write.updated_at });
  const names = Object.keys(fields) as (keyof OrchestrationTable)[];
  // Fields given as null are cleared: toColumns leaves out only undefined.
  await tx.run(`UPDATE orchestrations SET ${assignments(names)} WHERE id = ?`, [...names.map((name) => fields[name] ?? null), id]);
}
