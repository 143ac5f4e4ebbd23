/**
 * One pass of the interpreter over a definition: it walks the steps in order against the
 * replayed state, makes every decision the state allows (schedule, skip, consume, create a
 * timer) by emitting events, and reports what is still open. A pass on a history that is at its
 * fixed point emits nothing, so the same walk serves `decide()`, the restart's rebuild of open
 * work (`openWork`) and the instance view.
 *
 * Containers (`parallel`, `map`) and `set` leave no events of their own: their results are
 * worked out again on every pass from their children and from data the history fixes, so they
 * come out the same on every replay. A failure that needs no event (an expression leading
 * nowhere, a map over a non-array) is found again the same way.
 */
import { capValue, childPath, idempotencyKey, itemPath, jsonBytes, type HistoryEventData, type HistoryEventType } from './history.js';
import { LIMITS, retryPolicyOf, type ActivityStep, type RetryPolicy, type Definition, type JsonObject, type JsonValue, type MapStep, type ParallelStep, type Step } from './dsl.js';
import { evaluateCondition } from './conditions.js';
import { ExpressionError, resolveDeep, type ExpressionContext, type StepFacts } from './expressions.js';
import { present } from '../../../../errors.js';
import { durationMs } from '../../../../schemas/common.js';
import type { InstanceState } from './state.js';
import { CALL_BODY, EXEC_BODY, isTimestamp, RUN_BODY, schemaProblems } from './validate.js';

/**
 * A walk that gives the event loop a turn: it yields (nothing) every `YIELD_EVERY` steps it
 * reaches, and returns its result. `drain()` runs one to its end at once; the service's driver
 * runs it in slices, so no pass over a wide instance holds the event loop.
 */
export type Walk<T> = Generator<void, T, void>;

/** Steps a walk reaches between two yields. */
export const YIELD_EVERY = 4;

/** Runs a walk to its end, synchronously. */
export function drain<T>(walk: Walk<T>): T {
  for (;;) {
    const next = walk.next();
    if (next.done) return next.value;
  }
}

/**
 * Bounds of the work of one instance (the server's settings, docs/orchestrations.md): a pass
 * that passes one fails the instance with an error naming the bound.
 */
export interface WorkLimits {
  /** Steps a pass may reach: every step, container, map item and step inside one counts. */
  steps: number;
  /** Bytes of JSON of the outputs of `set`, `activity` and `wait_for_event` steps in a pass. */
  outputBytes: number;
  /** History events of an instance (then it fails `history limit reached`). */
  historyEvents: number;
}

/** What names each bound in errors: the server's flag. */
export const LIMIT_FLAGS = { steps: '--orchestration-max-steps', outputBytes: '--orchestration-max-output-bytes', historyEvents: '--orchestration-max-history-events' } as const;

/** A pass went past a bound of `WorkLimits`: the instance fails at `step`, whatever its `on_error`. */
export class WorkLimitError extends Error {
  override name = 'WorkLimitError';
  constructor(
    message: string,
    readonly step: string,
  ) {
    super(message);
  }
}

export interface InstanceMeta {
  id: string;
  name: string;
}

/** What the service runs for an activity attempt. */
export interface ActivityCommand {
  type: 'schedule_activity';
  step: string;
  attempt: number;
  kind: 'run' | 'exec' | 'call';
  /**
   * The resolved body: for run and exec the /run or /exec body (exec's with `sandbox`), env
   * holding SANDBOXD_ORCHESTRATION_ID, SANDBOXD_STEP, SANDBOXD_ATTEMPT and
   * SANDBOXD_IDEMPOTENCY_KEY, non-string `stdin`, `command` items and `env` values as JSON
   * text; for call `{class, object_id, method, args, timeout_ms?}`.
   */
  body: JsonObject;
  idempotency_key: string;
  /** The step's, else the definition's default; null: the engine's own default. */
  timeout_ms: number | null;
  output: 'text' | 'json';
}

/** Work an instance waits for. Timers (`retry`, `timer`, a wait's `deadline`) need a timer row. */
export type OpenWork =
  | {
      kind: 'activity';
      step: string;
      attempt: number;
      phase: 'scheduled' | 'running';
      scheduled_at: string;
      command: ActivityCommand;
      /** What decide() needs to handle the attempt's failure. */
      policy: RetryPolicy;
      retry_on_interrupt: boolean;
    }
  | { kind: 'retry'; step: string; attempt: number; fire_at: string }
  | { kind: 'timer'; step: string; fire_at: string }
  | { kind: 'wait'; step: string; event: string; deadline: string | null };

export type Outcome =
  | { status: 'completed' | 'skipped'; facts: StepFacts }
  /** `step`: the path of the step that failed first (the innermost). `exit_code`/`stderr`: a failed activity's last attempt. */
  | { status: 'failed'; error: string; step: string; exit_code?: number | null; stderr?: string | null }
  | { status: 'open' };

/** One step of a list a pass walked, in definition order, for the instance view. `pending`: not reached. */
export interface TraceEntry {
  path: string;
  step: Step;
  outcome: Outcome | { status: 'pending' };
}

/** Appends an event (stamped and numbered by the caller) and applies it to the state. */
export type Emit = <T extends HistoryEventType>(type: T, step: string | null, data: HistoryEventData[T]) => void;

const facts = (output: JsonValue, status: StepFacts['status'] = 'completed', extra: Partial<StepFacts> = {}): StepFacts => ({
  output,
  exit_code: null,
  stderr: null,
  status,
  ...extra,
});

const asText = (value: JsonValue): string => (typeof value === 'string' ? value : JSON.stringify(value));
const isObject = (value: JsonValue | undefined): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A walk over a definition against a state; see the file header. */
export class Pass {
  readonly open: OpenWork[] = [];
  readonly trace: TraceEntry[] = [];
  /** Steps reached so far, and bytes of step outputs held. */
  private reached = 0;
  private outputBytes = 0;

  constructor(
    private readonly definition: Definition,
    private readonly state: InstanceState,
    private readonly meta: InstanceMeta,
    /** The timestamp events emitted now will carry: the base of timers made in this pass. */
    private readonly stamp: string,
    private readonly emit: Emit,
    /** Absent: no bound on steps or output bytes (the pure interpreter's own tests). */
    private readonly limits?: Pick<WorkLimits, 'steps' | 'outputBytes'>,
  ) {}

  /**
   * Walks the top-level steps; `facts` of the last step when all are done. A bound of `limits`
   * passed fails the walk at the step that passed it, whatever the steps' `on_error`.
   */
  *run(): Walk<{ status: 'done'; output: JsonValue; context: ExpressionContext } | Extract<Outcome, { status: 'failed' | 'open' }>> {
    const context: ExpressionContext = { input: this.state.started?.input ?? null, orchestration: this.meta, steps: new Map() };
    try {
      return yield* this.list(this.definition.steps, '', context);
    } catch (err) {
      if (!(err instanceof WorkLimitError)) throw err;
      return { status: 'failed', error: err.message, step: err.step };
    }
  }

  /** A list of steps in order; each step sees the ones before it. */
  private *list(
    steps: Step[],
    parent: string,
    outer: ExpressionContext,
  ): Walk<{ status: 'done'; output: JsonValue; context: ExpressionContext } | Extract<Outcome, { status: 'failed' | 'open' }>> {
    const visible = new Map(outer.steps);
    const context: ExpressionContext = { ...outer, steps: visible };
    let last: JsonValue = null;
    for (const [index, step] of steps.entries()) {
      const path = childPath(parent, step.id);
      const outcome = yield* this.traced(step, path, () => this.step(step, path, context));
      const stops = outcome.status === 'open' || (outcome.status === 'failed' && step.on_error !== 'continue');
      if (stops) {
        for (const rest of steps.slice(index + 1)) this.trace.push({ path: childPath(parent, rest.id), step: rest, outcome: { status: 'pending' } });
        return outcome as Extract<Outcome, { status: 'failed' | 'open' }>;
      }
      if (outcome.status === 'failed') {
        // on_error continue: output null; a failed activity still shows its last exit code and stderr.
        visible.set(step.id, facts(null, 'failed', { exit_code: outcome.exit_code ?? null, stderr: outcome.stderr ?? null }));
        last = null;
        continue;
      }
      visible.set(step.id, outcome.facts);
      last = outcome.facts.output;
    }
    return { status: 'done', output: last, context };
  }

  /**
   * Runs `walk` with the step's trace entry placed before those of its children; counts the
   * step and its output against the limits, and gives the event loop a turn every YIELD_EVERY steps.
   */
  private *traced(step: Step, path: string, walk: () => Walk<Outcome>): Walk<Outcome> {
    this.reached += 1;
    if (this.limits && this.reached > this.limits.steps) {
      throw new WorkLimitError(`step limit reached: the instance would run more than ${this.limits.steps} steps (${LIMIT_FLAGS.steps})`, path);
    }
    if (this.reached % YIELD_EVERY === 0) yield;
    const entry: TraceEntry = { path, step, outcome: { status: 'pending' } };
    this.trace.push(entry);
    entry.outcome = yield* walk();
    if (this.limits && entry.outcome.status === 'completed' && step.type !== 'map' && step.type !== 'parallel') {
      this.outputBytes += jsonBytes(entry.outcome.facts.output);
      if (this.outputBytes > this.limits.outputBytes) {
        throw new WorkLimitError(
          `output limit reached: the outputs of the instance's steps pass ${this.limits.outputBytes} bytes of JSON (${LIMIT_FLAGS.outputBytes})`,
          path,
        );
      }
    }
    return entry.outcome;
  }

  /** One step at `path`: its `when`, then its type's rules. */
  private *step(step: Step, path: string, context: ExpressionContext): Walk<Outcome> {
    const record = this.state.steps.get(path);
    if (record?.skipped) return { status: 'skipped', facts: facts(null, 'skipped') };
    const begun = record?.activity || record?.timer || record?.consumed;
    if (step.when && !begun) {
      let holds: boolean;
      try {
        holds = evaluateCondition(step.when, context);
      } catch (err) {
        if (err instanceof ExpressionError) return { status: 'failed', error: `when: ${err.message}`, step: path };
        throw err;
      }
      if (!holds) {
        this.emit('StepSkipped', path, {});
        return { status: 'skipped', facts: facts(null, 'skipped') };
      }
    }
    try {
      switch (step.type) {
        case 'activity':
          return this.activity(step, path, context);
        case 'timer':
          return this.timer(step.duration, step.until, path, context);
        case 'wait_for_event':
          return this.wait(step.event, step.timeout, step.on_timeout ?? 'fail', path);
        case 'parallel':
          return yield* this.parallel(step, path, context);
        case 'map':
          return yield* this.map(step, path, context);
        case 'set':
          return { status: 'completed', facts: facts(resolveDeep(step.value, context, 'value')) };
      }
    } catch (err) {
      if (err instanceof ExpressionError) return { status: 'failed', error: err.message, step: path };
      throw err;
    }
  }

  private activity(step: ActivityStep, path: string, context: ExpressionContext): Outcome {
    const activity = this.state.steps.get(path)?.activity;
    if (activity?.phase === 'completed') {
      return { status: 'completed', facts: facts(activity.output, 'completed', { exit_code: activity.exit_code, stderr: activity.stderr }) };
    }
    if (activity?.phase === 'failed') return { status: 'failed', error: activity.error ?? 'failed', step: path, exit_code: activity.exit_code, stderr: activity.stderr };
    if (activity?.phase === 'retrying') {
      this.open.push({ kind: 'retry', step: path, attempt: activity.attempt, fire_at: present(activity.retry_at, `the retry time of ${path}`) });
      return { status: 'open' };
    }
    const attempt = !activity ? 1 : activity.phase === 'retry_due' ? activity.attempt + 1 : activity.attempt;
    const command = this.command(step, path, attempt, context);
    if (typeof command === 'string') return { status: 'failed', error: command, step: path };
    if (!activity || activity.phase === 'retry_due') {
      this.emit('ActivityScheduled', path, { attempt, idempotency_key: command.idempotency_key });
    }
    const current = present(this.state.steps.get(path)?.activity, `the activity record of ${path}`);
    this.open.push({
      kind: 'activity',
      step: path,
      attempt,
      phase: current.phase === 'running' ? 'running' : 'scheduled',
      scheduled_at: current.scheduled_at,
      command,
      policy: retryPolicyOf(step, this.definition.defaults),
      retry_on_interrupt: step.retry_on_interrupt !== false,
    });
    return { status: 'open' };
  }

  /** The resolved command of an attempt, or why the body is not one the engine takes. */
  private command(step: ActivityStep, path: string, attempt: number, context: ExpressionContext): ActivityCommand | string {
    const kind = step.run ? 'run' : step.exec ? 'exec' : 'call';
    const defaults = this.definition.defaults;
    const spec = step.run ?? step.exec ?? present(step.call, `the body of activity ${path}`);
    const body = resolveDeep(spec, context, kind) as JsonObject;
    const key = idempotencyKey(this.meta.id, path);
    if (kind !== 'call') {
      if (kind === 'run') {
        if (body.image === undefined && defaults?.image !== undefined) body.image = defaults.image;
        if (body.profile === undefined && defaults?.profile !== undefined) body.profile = defaults.profile;
      }
      // Where the engine takes text, a value that is not a string is passed as its JSON text.
      if (body.stdin !== undefined) body.stdin = asText(body.stdin);
      if (Array.isArray(body.command)) body.command = body.command.map(asText);
      const env = Array.isArray(body.env)
        ? Object.fromEntries(body.env.map((entry) => asText(entry).split(/=(.*)/s).slice(0, 2)))
        : isObject(body.env)
          ? Object.fromEntries(Object.entries(body.env).map(([name, value]) => [name, asText(value)]))
          : body.env;
      body.env = {
        ...(isObject(env) ? env : {}),
        SANDBOXD_ORCHESTRATION_ID: this.meta.id,
        SANDBOXD_STEP: path,
        SANDBOXD_ATTEMPT: String(attempt),
        SANDBOXD_IDEMPOTENCY_KEY: key,
      };
    }
    const problems = schemaProblems(kind === 'run' ? RUN_BODY : kind === 'exec' ? EXEC_BODY : CALL_BODY, body, kind);
    if (problems.length > 0) return `the resolved body is not valid: ${problems.join('; ')}`;
    const own = typeof body.timeout_ms === 'number' ? body.timeout_ms : undefined;
    return {
      type: 'schedule_activity',
      step: path,
      attempt,
      kind,
      body,
      idempotency_key: key,
      timeout_ms: own ?? defaults?.timeout_ms ?? null,
      output: step.output ?? 'text',
    };
  }

  private timer(duration: string | undefined, until: string | undefined, path: string, context: ExpressionContext): Outcome {
    const timer = this.state.steps.get(path)?.timer;
    if (timer?.fired_at) return { status: 'completed', facts: facts(null) };
    if (!timer) {
      let fireAt: string;
      if (duration !== undefined) fireAt = new Date(Date.parse(this.stamp) + present(durationMs(duration), `the duration of ${path}`)).toISOString();
      else {
        const resolved = resolveDeep(present(until, `the until of timer ${path}`), context, 'until');
        if (typeof resolved !== 'string' || !isTimestamp(resolved)) {
          return { status: 'failed', error: `until: ${JSON.stringify(resolved)} is not an RFC 3339 timestamp`, step: path };
        }
        fireAt = new Date(resolved).toISOString();
      }
      this.emit('TimerCreated', path, { fire_at: fireAt });
    }
    this.open.push({ kind: 'timer', step: path, fire_at: present(this.state.steps.get(path)?.timer, `the timer of ${path}`).fire_at });
    return { status: 'open' };
  }

  private wait(event: string, timeout: string | undefined, onTimeout: 'fail' | 'continue', path: string): Outcome {
    const record = this.state.steps.get(path);
    if (record?.consumed) return { status: 'completed', facts: facts(record.consumed.data) };
    if (record?.timer?.fired_at) {
      if (onTimeout === 'continue') return { status: 'completed', facts: facts(null) };
      return { status: 'failed', error: `timed out after ${timeout} waiting for event '${event}'`, step: path };
    }
    // Buffered events are consumed in raise order by the first open wait for their name.
    const buffered = this.state.events.find((raised) => raised.name === event && raised.consumed_by === null);
    if (buffered) {
      this.emit('EventConsumed', path, { name: event, raised_sequence: buffered.sequence });
      return { status: 'completed', facts: facts(buffered.data) };
    }
    if (timeout !== undefined && !record?.timer) {
      this.emit('TimerCreated', path, { fire_at: new Date(Date.parse(this.stamp) + present(durationMs(timeout), `the timeout of ${path}`)).toISOString() });
    }
    this.open.push({ kind: 'wait', step: path, event, deadline: this.state.steps.get(path)?.timer?.fire_at ?? null });
    return { status: 'open' };
  }

  private *parallel(step: ParallelStep, path: string, context: ExpressionContext): Walk<Outcome> {
    const mark = this.open.length;
    const failFast = step.fail_fast !== false;
    const output: JsonObject = {};
    let failure: Extract<Outcome, { status: 'failed' }> | undefined;
    let open = false;
    for (const [name, steps] of Object.entries(step.branches)) {
      const result = yield* this.list(steps, `${path}.${name}`, context);
      if (result.status === 'open') open = true;
      else if (result.status === 'failed') {
        failure ??= result;
        if (failFast) break;
      } else output[name] = result.output;
    }
    if (failure && (failFast || !open)) {
      // fail_fast: what the other branches have open is dropped (and cancelled by decide()).
      this.open.length = mark;
      return failure;
    }
    return open ? { status: 'open' } : { status: 'completed', facts: facts(output) };
  }

  private *map(step: MapStep, path: string, context: ExpressionContext): Walk<Outcome> {
    const items = resolveDeep(step.items, context, 'items');
    if (!Array.isArray(items)) return { status: 'failed', error: `items: must resolve to an array, got ${items === null ? 'null' : typeof items}`, step: path };
    if (items.length > LIMITS.mapItems) return { status: 'failed', error: `items: ${items.length} items, at most ${LIMITS.mapItems}`, step: path };
    const limit = step.max_concurrency ?? LIMITS.mapConcurrencyDefault;
    const mark = this.open.length;
    const outputs: JsonValue[] = [];
    let running = 0;
    // Items start in index order, so the started ones are always a prefix: walking in order and
    // stopping at the limit reaches every started item before any new one.
    for (const [index, item] of items.entries()) {
      if (running >= limit) return { status: 'open' };
      const inner: Step = { ...step.step, id: step.step.id ?? step.id };
      const at = itemPath(path, index);
      const outcome = yield* this.traced(inner, at, () => this.step(inner, at, { ...context, map: { item, index } }));
      if (outcome.status === 'open') running += 1;
      else if (outcome.status === 'failed') {
        if (inner.on_error === 'continue') outputs.push(null);
        else {
          this.open.length = mark;
          return outcome;
        }
      } else outputs.push(outcome.facts.output);
    }
    return running > 0 ? { status: 'open' } : { status: 'completed', facts: facts(outputs) };
  }
}

/** A step output as history keeps it: at most LIMITS.outputBytes. */
export const capOutput = (value: JsonValue) => capValue(value, LIMITS.outputBytes);
