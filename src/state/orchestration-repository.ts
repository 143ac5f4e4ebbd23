import { RowCodec, type Decoded } from './row-codec.js';
import type { OrchestrationDefinitionTable, OrchestrationHistoryTable, OrchestrationTable, OrchestrationTaskTable } from './schema.js';
import type { Statements } from './store.js';

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
 * Orchestration definitions, instances, their histories and open work. Everything runs as
 * prepared statements on the store's connection: a transition's events, task and timer rows
 * and instance status commit in one synchronous transaction (nothing interleaves), which is
 * what makes a transition happen exactly once across a kill -9.
 */
export class OrchestrationRepository {
  constructor(private readonly statements: Statements) {}

  definition(name: string): DefinitionRecord | undefined {
    const row = this.statements.get('SELECT * FROM orchestration_definitions WHERE name = ?').get(name) as OrchestrationDefinitionTable | undefined;
    return row && definitionCodec.fromRow(row);
  }

  definitions(): DefinitionRecord[] {
    const rows = this.statements.get('SELECT * FROM orchestration_definitions ORDER BY name').all() as OrchestrationDefinitionTable[];
    return rows.map((row) => definitionCodec.fromRow(row));
  }

  /** Inserts or replaces a definition. */
  saveDefinition(record: DefinitionRecord): void {
    const row = definitionCodec.toRow(record);
    this.statements
      .get('INSERT OR REPLACE INTO orchestration_definitions (name, version, content, hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(row.name, row.version, row.content, row.hash, row.created_at, row.updated_at);
  }

  deleteDefinition(name: string): boolean {
    return this.statements.get('DELETE FROM orchestration_definitions WHERE name = ?').run(name).changes > 0;
  }

  instance(id: string): InstanceRecord | undefined {
    const row = this.statements.get('SELECT * FROM orchestrations WHERE id = ?').get(id) as OrchestrationTable | undefined;
    return row && instanceCodec.fromRow(row);
  }

  byCallerKey(key: string): InstanceRecord | undefined {
    const row = this.statements.get('SELECT * FROM orchestrations WHERE caller_key = ?').get(key) as OrchestrationTable | undefined;
    return row && instanceCodec.fromRow(row);
  }

  /** Instances newest first (UUIDv7 ids sort by creation; caller-chosen ids by their text). */
  list(filter: { status?: string; name?: string; before?: string; limit: number }): InstanceRecord[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.status) (where.push('status = ?'), args.push(filter.status));
    if (filter.name) (where.push('name = ?'), args.push(filter.name));
    if (filter.before) (where.push('(created_at, id) < (SELECT created_at, id FROM orchestrations WHERE id = ?)'), args.push(filter.before));
    const sql = `SELECT * FROM orchestrations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`;
    const rows = this.statements.get(sql).all(...args, filter.limit) as OrchestrationTable[];
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** Instances not finished, oldest first (the restart's re-arm). */
  unfinished(): InstanceRecord[] {
    const rows = this.statements.get(`SELECT * FROM orchestrations WHERE status NOT IN ${FINISHED} ORDER BY created_at, id`).all() as OrchestrationTable[];
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** The last sequence of an instance's history (0 for none): what a kept state is checked against. */
  lastSequence(id: string): number {
    const row = this.statements.get('SELECT max(sequence) AS last FROM orchestration_history WHERE instance = ?').get(id) as { last: number | null };
    return row.last ?? 0;
  }

  history(id: string): HistoryRow[] {
    const rows = this.statements
      .get('SELECT sequence, type, step, data, timestamp FROM orchestration_history WHERE instance = ? ORDER BY sequence')
      .all(id) as Omit<OrchestrationHistoryTable, 'instance'>[];
    return rows.map((row) => ({ ...row, data: JSON.parse(row.data) as unknown }));
  }

  tasks(id: string): TaskRecord[] {
    const rows = this.statements.get('SELECT * FROM orchestration_tasks WHERE instance = ? ORDER BY step').all(id) as OrchestrationTaskTable[];
    return rows.map((row) => taskCodec.fromRow(row));
  }

  timers(id: string): TimerRow[] {
    return this.statements.get('SELECT * FROM orchestration_timers WHERE instance = ? ORDER BY fire_at, step').all(id) as TimerRow[];
  }

  /**
   * Inserts a new instance and its first transition in one transaction; a taken id or caller
   * key fails with SQLITE_CONSTRAINT (the caller holds the id's lock and looked first).
   */
  create(record: InstanceRecord, events: readonly HistoryRow[], write: TransitionWrite): void {
    this.statements.transaction(() => {
      const row = instanceCodec.toRow(record);
      this.statements
        .get(`INSERT INTO orchestrations (${INSTANCE_COLUMNS.join(', ')}) VALUES (${INSTANCE_COLUMNS.map(() => '?').join(', ')})`)
        .run(...INSTANCE_COLUMNS.map((column) => row[column] ?? null));
      this.applyTransition(record.id, events, write);
    });
  }

  /** Commits one transition: events appended, task and timer rows rebuilt, status and fields set. */
  commit(id: string, events: readonly HistoryRow[], write: TransitionWrite): void {
    this.statements.transaction(() => this.applyTransition(id, events, write));
  }

  private applyTransition(id: string, events: readonly HistoryRow[], write: TransitionWrite): void {
    const insertEvent = this.statements.get('INSERT INTO orchestration_history (instance, sequence, type, step, data, timestamp) VALUES (?, ?, ?, ?, ?, ?)');
    for (const event of events) insertEvent.run(id, event.sequence, event.type, event.step, JSON.stringify(event.data), event.timestamp);
    this.statements.get('DELETE FROM orchestration_tasks WHERE instance = ?').run(id);
    this.statements.get('DELETE FROM orchestration_timers WHERE instance = ?').run(id);
    const insertTask = this.statements.get('INSERT INTO orchestration_tasks (instance, step, attempt, state, command) VALUES (?, ?, ?, ?, ?)');
    const insertTimer = this.statements.get('INSERT OR REPLACE INTO orchestration_timers (instance, step, fire_at) VALUES (?, ?, ?)');
    for (const task of write.tasks) insertTask.run(id, task.step, task.attempt, task.state, JSON.stringify(task.command));
    for (const timer of write.timers) insertTimer.run(id, timer.step, timer.fire_at);
    const fields = instanceCodec.toColumns({ ...write.fields, status: write.status, updated_at: write.updated_at });
    const names = Object.keys(fields) as (keyof OrchestrationTable)[];
    // Fields given as null are cleared: toColumns leaves out only undefined.
    this.statements
      .get(`UPDATE orchestrations SET ${names.map((name) => `${name} = ?`).join(', ')} WHERE id = ?`)
      .run(...names.map((name) => fields[name] ?? null), id);
  }

  /** Deletes an instance and everything it has, in one transaction. */
  deleteInstance(id: string): void {
    this.statements.transaction(() => {
      for (const table of ['orchestration_history', 'orchestration_tasks', 'orchestration_timers']) {
        this.statements.get(`DELETE FROM ${table} WHERE instance = ?`).run(id);
      }
      this.statements.get('DELETE FROM orchestrations WHERE id = ?').run(id);
    });
  }

  /** The earliest timer row, pending start or retention purge due; null when none. */
  nextDue(retentionMs: number): string | null {
    const timer = (this.statements.get('SELECT MIN(fire_at) AS due FROM orchestration_timers').get() as { due: string | null }).due;
    const start = (this.statements.get("SELECT MIN(start_at) AS due FROM orchestrations WHERE status = 'pending'").get() as { due: string | null }).due;
    const finished = (this.statements.get(`SELECT MIN(completed_at) AS done FROM orchestrations WHERE status IN ${FINISHED}`).get() as { done: string | null }).done;
    const purge = finished === null ? null : new Date(Date.parse(finished) + retentionMs).toISOString();
    const candidates = [timer, start, purge].filter((due): due is string => due !== null);
    return candidates.length === 0 ? null : candidates.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b));
  }

  /** Timer rows due at `now`, earliest first. */
  dueTimers(now: string, limit: number): TimerRow[] {
    return this.statements.get('SELECT * FROM orchestration_timers WHERE fire_at <= ? ORDER BY fire_at LIMIT ?').all(now, limit) as TimerRow[];
  }

  /** Pending instances whose start_at has come. */
  dueStarts(now: string, limit: number): InstanceRecord[] {
    const rows = this.statements
      .get("SELECT * FROM orchestrations WHERE status = 'pending' AND start_at IS NOT NULL AND start_at <= ? ORDER BY start_at LIMIT ?")
      .all(now, limit) as OrchestrationTable[];
    return rows.map((row) => instanceCodec.fromRow(row));
  }

  /** Finished instances completed before `cutoff`. */
  expired(cutoff: string, limit: number): string[] {
    const rows = this.statements
      .get(`SELECT id FROM orchestrations WHERE status IN ${FINISHED} AND completed_at < ? ORDER BY completed_at LIMIT ?`)
      .all(cutoff, limit) as { id: string }[];
    return rows.map((row) => row.id);
  }
}
