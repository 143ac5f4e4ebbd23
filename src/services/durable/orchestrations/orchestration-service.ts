/**
 * Orchestrations as a service (docs/decisions.md, "Orchestrations (service)"): definitions,
 * instances and the loop around the pure interpreter. Every transition runs under the
 * instance's KeyedMutex: `decide()` over the committed history, then one SQLite transaction
 * with the new events, the instance's task and timer rows (rebuilt from the decision's open
 * work) and its status, then the commands: activities go to the worker pool, timers to the
 * DurableTimers driver (a poke), cancellations abort attempts. What an activity or a timer
 * reports becomes the input of the next transition.
 */
import { setImmediate as turn } from 'node:timers/promises';
import { v7 as uuidv7 } from 'uuid';
import type { ConfigSection } from '../../../config/config-schema.js';
import { badRequest, conflict, isServiceError, notFound, ServiceError } from '../../../errors.js';
import { checkedDurationMs } from '../../../schemas/common.js';
import type { OrchestrationRepository, InstanceRecord, TaskRecord } from '../../../state/orchestration-repository.js';
import type { OrchestrationInstance } from '../../../schemas/orchestration-schemas.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { Metrics } from '../../../telemetry/metrics.js';
import type { ServiceContext } from '../../context.js';
import { KeyedMutex } from '../../support/keyed-mutex.js';
import type { ObjectCaller } from '../object-caller.js';
import type { OrchestrationStarter } from '../orchestration-starter.js';
import { ActivityPool, type ActivityJob } from './activity-pool.js';
import { runActivity, type ActivityEngines } from './activity-runner.js';
import {
  decideWalk,
  isInlineForm,
  jsonBytes,
  leastWork,
  LIMIT_FLAGS,
  LIMITS,
  projectionWalk,
  replay,
  translateInline,
  type ActivityCommand,
  type Command,
  type DecideInput,
  type Decision,
  type Definition,
  type HistoryEvent,
  type InstanceState,
  type JsonObject,
  type KeptState,
  type JsonValue,
  type OpenWork,
  type Walk,
  type WorkLimits,
} from './interpreter/index.js';
import { DefinitionStore } from './definition-store.js';

export type InstanceStatus = InstanceRecord['status'];
const FINAL: ReadonlySet<InstanceStatus> = new Set(['completed', 'failed', 'terminated']);

/** The instance view (README, Orchestrations); `history` only when asked for. */
export type InstanceView = OrchestrationInstance;

/** Which part of an instance's steps and history a view carries (docs/orchestrations.md, "Bounds"). */
export interface ViewPage {
  history: boolean;
  steps_offset: number;
  steps_limit: number;
  history_after: number;
  history_limit: number;
}

/** A GET of one instance: every step and history event, 1000 at most per page. */
export const FULL_PAGE: ViewPage = { history: true, steps_offset: 0, steps_limit: 1000, history_after: 0, history_limit: 1000 };
/** An instance in a list: no history, its first 100 steps. */
const LIST_PAGE: ViewPage = { history: false, steps_offset: 0, steps_limit: 100, history_after: 0, history_limit: 0 };
/** Bytes of JSON of the steps of one view, and of its history: entries past it go to the next page. */
export const PAGE_BYTES = 4 * 1024 * 1024;
/** Bytes of JSON of the steps of one instance in a list. */
const LIST_STEP_BYTES = 64 * 1024;
/** Longest a walk holds the event loop before it gives other work a turn. */
const SLICE_MS = 5;
/**
 * Open instances whose derived state is kept between decisions (the most recently decided):
 * their next decision costs what it adds, not a replay of the history. Past it, an instance's
 * next decision replays its history once.
 */
const KEPT_STATES = 1000;

/** Runs a walk of the interpreter in slices of at most SLICE_MS, giving the event loop a turn between them. */
export async function inSlices<T>(walk: Walk<T>): Promise<T> {
  let since = performance.now();
  for (;;) {
    const next = walk.next();
    if (next.done) return next.value;
    if (performance.now() - since >= SLICE_MS) {
      await turn();
      since = performance.now();
    }
  }
}

export interface StartRequest {
  name: string;
  input?: unknown;
  /** Caller-chosen id: a repeat with the same name answers the existing instance. */
  id?: string;
  start_at?: string;
  /** An inline definition, not stored. */
  definition?: unknown;
}

export interface OrchestrationServiceInput extends Pick<ServiceContext, 'clock' | 'logger' | 'audit' | 'timers'>, ActivityEngines {
  repo: OrchestrationRepository;
  metrics: Pick<Metrics, 'orchestrations' | 'activitiesInflight' | 'activityDuration'>;
  /** Concurrency, retention and the bounds of an instance's work. */
  config: ConfigSection<'orchestrations'>;
}

/** Thrown out of a decision that must start over from the history, which a kept state does not hold: the service reads it and decides again. */
class HistoryWanted extends Error {}

export class OrchestrationService implements OrchestrationStarter {
  readonly definitions: DefinitionStore;
  readonly retentionMs: number;
  /** The bounds of one instance's work. */
  readonly limits: WorkLimits;
  private readonly repo: OrchestrationRepository;
  private readonly mutex = new KeyedMutex();
  /** Derived state of open instances, by id, in the order they were last decided (see keptState). */
  private readonly states = new Map<string, InstanceState>();
  private readonly pool: ActivityPool;
  private readonly logger: Logger;
  private readonly input: OrchestrationServiceInput;

  constructor(input: OrchestrationServiceInput) {
    this.input = input;
    this.repo = input.repo;
    this.logger = input.logger;
    const { config } = input;
    this.retentionMs = checkedDurationMs(config.orchestrationRetention);
    this.limits = { steps: config.orchestrationMaxSteps, historyEvents: config.orchestrationMaxHistoryEvents, outputBytes: config.orchestrationMaxOutputBytes };
    this.definitions = new DefinitionStore(input.repo, input.clock);
    this.pool = new ActivityPool(config.orchestrationConcurrency, (job, signal) => this.runJob(job, signal));
  }

  /** OrchestrationStarter: NOT_FOUND unless the definition exists. */
  async requireDefinition(name: string): Promise<void> {
    await this.definitions.require(name);
  }

  /** OrchestrationStarter: a schedule's start, once per idempotency key. */
  async start(input: { definition: string; input: unknown; idempotency_key: string }): Promise<{ orchestration_id: string }> {
    return this.mutex.run(`caller:${input.idempotency_key}`, async () => {
      const existing = await this.repo.byCallerKey(input.idempotency_key);
      if (existing) return { orchestration_id: existing.id };
      const { instance } = await this.create({ name: input.definition, input: input.input }, input.idempotency_key);
      return { orchestration_id: instance.id };
    });
  }

  /**
   * POST /orchestrations. `created` false: the id existed with the same name (idempotent start).
   * The instance row and its first decision commit together: the answer's status is committed.
   */
  async create(request: StartRequest, callerKey: string | null = null): Promise<{ instance: InstanceView; created: boolean }> {
    const id = request.id ?? uuidv7();
    return this.mutex.run(id, async () => {
      // A repeat answers the instance as it is, even if its definition changed or went since.
      const existing = await this.repo.instance(id);
      if (existing) {
        if (existing.name !== request.name) throw conflict(`orchestration '${id}' exists already, of definition '${existing.name}'`);
        return { instance: await this.viewOf(existing, FULL_PAGE), created: false };
      }
      const { definition, version, input } = await this.resolve(request);
      const bytes = jsonBytes(input);
      if (bytes > LIMITS.inputBytes) throw new ServiceError('PAYLOAD_TOO_LARGE', `input: ${bytes} bytes of JSON; at most ${LIMITS.inputBytes} (1 MiB)`);
      this.checkLeastWork(definition, input);
      const now = this.now();
      const startAt = request.start_at && Date.parse(request.start_at) > Date.parse(now) ? new Date(request.start_at).toISOString() : null;
      const record: InstanceRecord = {
        id,
        name: request.name,
        definition_version: version,
        definition,
        status: 'pending',
        input,
        output: null,
        error: null,
        failed_step: null,
        caller_key: callerKey,
        start_at: startAt,
        created_at: now,
        updated_at: now,
        started_at: null,
        completed_at: null,
      };
      if (startAt) {
        await this.repo.create(record, [], { status: 'pending', tasks: [], timers: [], updated_at: now });
        void this.input.timers.poke();
      } else {
        const decision = await inSlices(decideWalk(definition, [], { instance: { id, name: request.name }, now, inputs: [{ type: 'start', input }], limits: this.limits }));
        await this.repo.create(record, decision.newEvents, this.writeOf(decision, now));
        // Started before whatever the first decision ends in (an instance of `set` steps completes in it).
        this.input.audit.resourceEvent('orchestration.started', this.resource(record), { definition_version: version });
        this.input.metrics.orchestrations.inc({ status: 'started' });
        this.carryOut(id, request.name, decision.commands);
      }
      return { instance: await this.viewOf(await this.require(id), FULL_PAGE), created: true };
    });
  }

  /** GET /orchestrations/{id}: one page of its steps and history (FULL_PAGE: the first). */
  async get(id: string, page: Partial<ViewPage> = {}): Promise<InstanceView> {
    return this.viewOf(await this.require(id), { ...FULL_PAGE, ...page });
  }

  /** GET /orchestrations: newest first, without history, the first steps of each. */
  async list(filter: { status?: string; name?: string; before?: string; limit?: number }): Promise<InstanceView[]> {
    const views: InstanceView[] = [];
    for (const record of await this.repo.list({ ...filter, limit: filter.limit ?? 100 })) views.push(await this.viewOf(record, LIST_PAGE, LIST_STEP_BYTES));
    return views;
  }

  /**
   * The static bound (docs/orchestrations.md, "Bounds"): a start whose definition will surely run
   * more steps or keep more history events than an instance may is a 400 naming the bound.
   */
  private checkLeastWork(definition: Definition, input: JsonValue): void {
    const least = leastWork(definition, input);
    if (least.steps > this.limits.steps) {
      throw badRequest(`definition: an instance would run at least ${least.steps} steps, more than the limit of ${this.limits.steps} (${LIMIT_FLAGS.steps})`);
    }
    if (least.historyEvents > this.limits.historyEvents) {
      throw badRequest(
        `definition: an instance would keep at least ${least.historyEvents} history events, more than the limit of ${this.limits.historyEvents} (${LIMIT_FLAGS.historyEvents})`,
      );
    }
  }

  /** POST /orchestrations/{id}/events: recorded whatever the instance does; buffered until a wait takes it. */
  async raiseEvent(id: string, name: string, data: unknown): Promise<{ accepted: true; id: string; event: string; sequence: number }> {
    const bytes = jsonBytes((data ?? null) as JsonValue);
    if (bytes > LIMITS.outputBytes) throw new ServiceError('PAYLOAD_TOO_LARGE', `data: ${bytes} bytes of JSON; at most ${LIMITS.outputBytes} (1 MiB)`);
    const decision = await this.transition(id, [{ type: 'event_raised', name, data: (data ?? null) as JsonValue }], (record) => {
      if (FINAL.has(record.status)) throw conflict(`orchestration '${id}' is ${record.status}; it takes no more events`);
    });
    const raised = decision.newEvents.find((event) => event.type === 'EventRaised');
    if (!raised) throw conflict(`orchestration '${id}' reached its history limit of ${this.limits.historyEvents} events (${LIMIT_FLAGS.historyEvents}); it takes no more events`);
    return { accepted: true, id, event: name, sequence: raised.sequence };
  }

  /** POST /orchestrations/{id}/terminate: open work cancelled, running activities aborted. */
  async terminate(id: string, reason = 'terminated by request'): Promise<InstanceView> {
    await this.transition(id, [{ type: 'terminate', reason }], (record) => {
      if (FINAL.has(record.status)) throw conflict(`orchestration '${id}' is ${record.status} already; it cannot be terminated`);
    });
    return await this.get(id);
  }

  /** DELETE /orchestrations/{id}: finished instances only. */
  async remove(id: string): Promise<{ deleted: true; id: string }> {
    return this.mutex.run(id, async () => {
      const record = await this.require(id);
      if (!FINAL.has(record.status)) throw conflict(`orchestration '${id}' is ${record.status}; terminate it first, only finished instances are deleted`);
      await this.repo.deleteInstance(id);
      return { deleted: true as const, id };
    });
  }

  /**
   * After a restart (docs/decisions.md, "Orchestrations (service)"): an attempt found running died with the process and becomes
   * `activity_interrupted` (a new attempt, or a failure where `retry_on_interrupt` is false);
   * scheduled attempts run; timers are rows the timer source reads (overdue ones fire at once).
   */
  async recover(): Promise<void> {
    for (const record of await this.repo.unfinished()) {
      const tasks = (await this.repo.tasks(record.id)) as TaskRecord<ActivityCommand>[];
      const interrupted: DecideInput[] = tasks
        .filter((task) => task.state === 'running')
        .map((task) => ({ type: 'activity_interrupted', step: task.step, attempt: task.attempt }));
      try {
        if (interrupted.length > 0) await this.transition(record.id, interrupted);
        for (const task of (await this.repo.tasks(record.id)) as TaskRecord<ActivityCommand>[]) {
          if (task.state === 'scheduled') this.pool.submit({ instance: record.id, command: task.command });
        }
      } catch (err) {
        this.logger.error({ err, orchestration: record.id }, 'orchestration not recovered');
      }
    }
    void this.input.timers.poke();
  }

  /** Timer source work: a timer row came due. */
  async fireTimer(instance: string, step: string): Promise<void> {
    await this.transition(instance, [{ type: 'timer_fired', step }]).catch((err: unknown) => this.swallowGone(err, instance));
  }

  /** Timer source work: a pending instance's start_at came. */
  async startDue(id: string): Promise<void> {
    await this.transition(id, [], undefined, (record) => (record.status === 'pending' ? [{ type: 'start', input: record.input as JsonValue }] : [])).catch(
      (err: unknown) => this.swallowGone(err, id),
    );
  }

  /** Timer source work: finished instances past the retention are deleted. */
  async purge(now: Date): Promise<number> {
    const ids = await this.repo.expired(new Date(now.getTime() - this.retentionMs).toISOString(), 500);
    for (const id of ids) await this.repo.deleteInstance(id);
    if (ids.length > 0) this.logger.info({ count: ids.length }, 'finished orchestrations purged');
    return ids.length;
  }

  /** Aborts running activities and stops; their rows stay for the next start to re-arm. */
  async close(): Promise<void> {
    await this.pool.close();
  }

  /** Attempts running now. */
  get inflight(): number {
    return this.pool.inflight;
  }

  /**
   * One transition under the instance's lock. `check` refuses before anything is decided (409s);
   * `inputsOf` builds inputs from the locked record (a due start).
   */
  private async transition(
    id: string,
    inputs: DecideInput[],
    check?: (record: InstanceRecord) => unknown,
    inputsOf?: (record: InstanceRecord) => DecideInput[],
  ): Promise<Decision> {
    return this.mutex.run(id, async () => {
      const record = await this.repo.instance(id);
      if (!record) throw notFound(`orchestration '${id}' not found`);
      check?.(record);
      const definition = record.definition as Definition;
      const now = this.now();
      const options = { instance: { id, name: record.name }, now, inputs: inputsOf ? inputsOf(record) : inputs, limits: this.limits };
      const kept = await this.keptState(id);
      let decision: Decision;
      let state: InstanceState | undefined = kept.state;
      try {
        decision = await inSlices(decideWalk(definition, kept, options));
      } catch (err) {
        // The rare decision that starts over (the history's limit) replays the whole history; its state is not kept.
        if (!(err instanceof HistoryWanted)) throw err;
        decision = await inSlices(decideWalk(definition, (await this.repo.history(id)) as HistoryEvent[], options));
        state = undefined;
      }
      if (decision.newEvents.length === 0 && decision.status === record.status) return this.keep(id, state, decision);
      await this.repo.commit(id, decision.newEvents, this.writeOf(decision, now));
      this.keep(id, state, decision);
      if (record.status === 'pending' && decision.newEvents.some((event) => event.type === 'OrchestratorStarted')) {
        this.input.audit.resourceEvent('orchestration.started', this.resource(record), { definition_version: record.definition_version });
        this.input.metrics.orchestrations.inc({ status: 'started' });
      }
      this.carryOut(id, record.name, decision.commands);
      return decision;
    });
  }

  /**
   * The derived state of an instance for its next decision: the one kept after its last
   * committed decision, when the history still ends where it did (another replica may have
   * decided since), else a replay of the history. Taken out of the cache: `keep` puts it back
   * once the decision is committed, so a decision that fails leaves nothing half-applied.
   */
  private async keptState(id: string): Promise<KeptState> {
    const cached = this.states.get(id);
    this.states.delete(id);
    const state = cached && cached.lastSequence === (await this.repo.lastSequence(id)) ? cached : replay((await this.repo.history(id)) as HistoryEvent[]);
    // The history is read only for a decision that starts over: it is asked for again, outside the interpreter.
    const history = (): never => {
      throw new HistoryWanted();
    };
    return { state, history };
  }

  /** Keeps an open instance's state (the most recent KEPT_STATES); answers the decision. */
  private keep(id: string, state: InstanceState | undefined, decision: Decision): Decision {
    if (!state || state.finished) return decision;
    this.states.set(id, state);
    if (this.states.size > KEPT_STATES) this.states.delete(this.states.keys().next().value as string);
    return decision;
  }

  /** The rows and fields a decision commits with its events. */
  private writeOf(decision: Decision, now: string) {
    const stamp = decision.newEvents[0]?.timestamp ?? now;
    const started = decision.newEvents.find((event) => event.type === 'OrchestratorStarted');
    const finish = decision.commands.find((command): command is Extract<Command, { type: 'finish' }> => command.type === 'finish');
    return {
      status: decision.status,
      tasks: decision.open.flatMap((work) => (work.kind === 'activity' ? [{ step: work.step, attempt: work.attempt, state: work.phase, command: work.command }] : [])),
      timers: decision.open.flatMap((work) => {
        const fireAt = timerOf(work);
        return fireAt ? [{ step: work.step, fire_at: fireAt }] : [];
      }),
      updated_at: stamp,
      fields: {
        ...(started && { started_at: started.timestamp, start_at: null }),
        ...(finish && { output: finish.output, error: finish.error, failed_step: finish.failed_step, completed_at: stamp }),
      },
    };
  }

  /** The commands of a committed decision. */
  private carryOut(id: string, name: string, commands: readonly Command[]): void {
    let timersMoved = false;
    for (const command of commands) {
      switch (command.type) {
        case 'schedule_activity':
          this.pool.submit({ instance: id, command });
          break;
        case 'cancel_activity':
          this.pool.cancel(id, command.step, command.attempt);
          break;
        case 'create_timer':
        case 'cancel_timer':
          timersMoved = true;
          break;
        case 'finish': {
          this.pool.cancelInstance(id);
          timersMoved = true;
          this.input.metrics.orchestrations.inc({ status: command.status });
          this.input.audit.resourceEvent(`orchestration.${command.status}`, { kind: 'orchestration', id, name }, {
            ...(command.error !== null && { error: command.error }),
            ...(command.failed_step !== null && { failed_step: command.failed_step }),
          });
          break;
        }
      }
    }
    if (timersMoved) void this.input.timers.poke();
  }

  /** A worker slot's work: mark the attempt started, run it, report its outcome. */
  private async runJob(job: ActivityJob, signal: AbortSignal): Promise<void> {
    const { instance, command } = job;
    try {
      const started = await this.transition(instance, [{ type: 'activity_started', step: command.step, attempt: command.attempt }]);
      // Only an attempt still open runs; one cancelled or finished meanwhile is stale.
      const open = started.open.some((work) => work.kind === 'activity' && work.step === command.step && work.attempt === command.attempt && work.phase === 'running');
      if (!open || signal.aborted) return;
    } catch (err) {
      return this.swallowGone(err, instance);
    }
    const { metrics } = this.input;
    metrics.activitiesInflight.inc();
    const began = performance.now();
    let outcome;
    try {
      outcome = await runActivity(this.input, command, signal);
    } finally {
      metrics.activitiesInflight.dec();
    }
    // Closing: the task row stays `running`, and the next start reports it interrupted.
    if (this.pool.isClosed) return;
    const failed = outcome.type === 'activity_failed' || (outcome.exit_code !== undefined && outcome.exit_code !== 0);
    metrics.activityDuration.observe({ type: command.kind, outcome: signal.aborted ? 'cancelled' : failed ? 'failed' : 'completed' }, (performance.now() - began) / 1000);
    await this.transition(instance, [outcome]).catch((err: unknown) => this.swallowGone(err, instance));
  }

  /** Background transitions: an instance deleted meanwhile is no failure. */
  private swallowGone(err: unknown, instance: string): void {
    if (isServiceError(err) && err.code === 'NOT_FOUND') return;
    this.logger.error({ err, orchestration: instance }, 'orchestration transition failed');
  }

  /** The definition, its version (0: inline) and the input of a start request. */
  private async resolve(request: StartRequest): Promise<{ definition: Definition; version: number; input: JsonValue }> {
    const input = (request.input ?? null) as JsonValue;
    if (request.definition !== undefined) {
      const raw = request.definition as JsonObject;
      return { definition: this.definitions.check({ ...raw, name: raw.name ?? request.name }), version: 0, input };
    }
    const stored = await this.repo.definition(request.name);
    if (stored) return { definition: stored.content as Definition, version: stored.version, input };
    if (isInlineForm(input)) {
      const translated = translateInline(request.name, input as JsonObject);
      return { definition: translated.definition, version: 0, input: translated.input };
    }
    throw notFound(`orchestration definition '${request.name}' not found`);
  }

  private async require(id: string): Promise<InstanceRecord> {
    const record = await this.repo.instance(id);
    if (!record) throw notFound(`orchestration '${id}' not found`);
    return record;
  }

  /**
   * The instance view: the row's columns, and what the interpreter's projection of the
   * history says (steps, output, error, waiting_for); one page of the steps and the history.
   */
  private async viewOf(record: InstanceRecord, page: ViewPage, stepBytes = PAGE_BYTES): Promise<InstanceView> {
    const history = (await this.repo.history(record.id)) as HistoryEvent[];
    const projection = await inSlices(projectionWalk(record.definition as Definition, history, { id: record.id, name: record.name }, this.limits));
    const steps = pageOf(projection.steps, page.steps_offset, page.steps_limit, stepBytes);
    const events = page.history ? pageOf(history, history.findIndex((event) => event.sequence > page.history_after), page.history_limit, PAGE_BYTES) : undefined;
    return {
      id: record.id,
      name: record.name,
      definition_version: record.definition_version,
      status: record.status,
      input: record.input as JsonValue,
      output: projection.output,
      ...(projection.output_truncated && { output_truncated: true as const }),
      error: projection.error,
      failed_step: projection.failed_step,
      created_at: record.created_at,
      updated_at: record.updated_at,
      started_at: record.started_at,
      completed_at: record.completed_at,
      start_at: record.start_at,
      steps: steps.entries,
      steps_total: projection.steps.length,
      steps_next: steps.next === null ? null : page.steps_offset + steps.next,
      waiting_for: projection.waiting_for,
      ...(events && { history: events.entries, history_next: events.next === null ? null : (events.entries.at(-1)?.sequence ?? page.history_after) }),
    };
  }

  private resource(record: Pick<InstanceRecord, 'id' | 'name'>) {
    return { kind: 'orchestration', id: record.id, name: record.name };
  }

  private now(): string {
    return this.input.clock().toISOString();
  }
}

/**
 * Up to `limit` entries of `all` from `from` (-1: none left) while their JSON fits in `bytes`
 * (the first always goes); `next`: the index in `all`, relative to `from`, where the next page starts.
 */
function pageOf<T>(all: readonly T[], from: number, limit: number, bytes: number): { entries: T[]; next: number | null } {
  if (from < 0) return { entries: [], next: null };
  const entries: T[] = [];
  let left = bytes;
  for (let index = from; index < all.length && entries.length < limit; index++) {
    const size = Buffer.byteLength(JSON.stringify(all[index])) + 1;
    if (entries.length > 0 && size > left) break;
    left -= size;
    entries.push(all[index] as T);
  }
  return { entries, next: from + entries.length < all.length ? entries.length : null };
}

/** The due time of open work that needs a timer row (a timer, a retry's back-off, a wait's deadline). */
export function timerOf(work: OpenWork): string | null {
  if (work.kind === 'retry' || work.kind === 'timer') return work.fire_at;
  return work.kind === 'wait' ? work.deadline : null;
}
