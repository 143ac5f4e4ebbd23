/**
 * `decide()`: the whole interpreter as one pure function (docs/decisions.md, "Orchestrations
 * (interpreter)"). Given a definition snapshot, the committed history, the instance's id and
 * name, the timestamp to stamp new events with, and what happened since (inputs), it returns
 * the events to append and the commands to carry out once they are committed. It never reads
 * the clock and uses no randomness: all time comes from `now` (the stamp, which is also the
 * base of timers created in this decision) and from history timestamps. The same arguments
 * always give the same decision, and a history replayed after a crash gives the state it had.
 *
 * The caller's loop: take the instance's lock; `decide()`; commit `newEvents` (+ task and timer
 * rows from `commands`, + `status`) in one transaction; then carry out the commands; report
 * their results as inputs to the next `decide()`.
 */
import { backoffMs, LIMITS, type Definition, type JsonValue } from './dsl.js';
import { capOutput, drain, LIMIT_FLAGS, Pass, type ActivityCommand, type Emit, type InstanceMeta, type OpenWork, type Walk, type WorkLimits } from './drive.js';
import { resolveDeep, ExpressionError } from './expressions.js';
import { tailUtf8, type HistoryEvent, type HistoryEventData, type HistoryEventType } from './history.js';
import { applyEvent, replay, type FinalStatus, type InstanceState } from './state.js';
import { textDeeperThan, TOO_DEEP } from '../../../../domain/json-depth.js';

/** Something that happened to an instance, reported by the service. */
export type DecideInput =
  /** The instance starts (POST /orchestrations, or a due `start_at`). */
  | { type: 'start'; input: JsonValue }
  /** A worker took the attempt. */
  | { type: 'activity_started'; step: string; attempt: number }
  /**
   * The attempt ran to its end: run and exec give stdout, stderr and exit_code (a non-zero
   * exit code fails the attempt); call gives the method's `value`.
   */
  | { type: 'activity_completed'; step: string; attempt: number; duration_ms: number; stdout?: string; stderr?: string; exit_code?: number; value?: JsonValue }
  /** The attempt could not run or did not finish (sandbox missing, method threw, timed out). */
  | { type: 'activity_failed'; step: string; attempt: number; error: string; exit_code?: number; stderr?: string }
  /** Found `running` after a restart: its worker died with the process. */
  | { type: 'activity_interrupted'; step: string; attempt: number }
  /** A timer row of the step came due (a timer step, a wait's deadline, a retry's back-off). */
  | { type: 'timer_fired'; step: string }
  | { type: 'event_raised'; name: string; data: JsonValue }
  | { type: 'terminate'; reason: string };

export type Command =
  | ActivityCommand
  /** Keep a timer row for the step; when due, report `timer_fired`. */
  | { type: 'create_timer'; step: string; fire_at: string }
  /** Abort the attempt if it runs (remove the run's container, kill the exec), drop its task. */
  | { type: 'cancel_activity'; step: string; attempt: number }
  | { type: 'cancel_timer'; step: string }
  /** The instance reached a final status. */
  | { type: 'finish'; status: FinalStatus; output: JsonValue; error: string | null; failed_step: string | null };

export type InstanceStatus = 'pending' | 'running' | 'waiting' | FinalStatus;

export interface Decision {
  /** To append, sequences following the history's; every one stamped with the same timestamp. */
  newEvents: HistoryEvent[];
  /** To carry out after the commit, in this order. */
  commands: Command[];
  status: InstanceStatus;
  /** What the instance waits for after the decision (rebuilds task and timer rows at restart). */
  open: OpenWork[];
}

export interface DecideOptions {
  instance: InstanceMeta;
  /**
   * The timestamp of the new events (RFC 3339). It never goes behind the history's last
   * timestamp: the later of the two is used, so a clock stepping back keeps history ordered.
   */
  now: string;
  inputs?: DecideInput[];
  /** The server's bounds of an instance's work; absent: LIMITS.historyEvents and no other bound. */
  limits?: WorkLimits;
}

export const INTERRUPTED = 'interrupted by server restart';

const timerOf = (work: OpenWork): string | null =>
  work.kind === 'retry' || work.kind === 'timer' ? work.fire_at : work.kind === 'wait' ? work.deadline : null;

/** Status of an instance from its state and what it has open. */
export function statusOf(state: InstanceState, open: readonly OpenWork[]): InstanceStatus {
  if (state.finished) return state.finished.status;
  if (!state.started) return 'pending';
  return open.some((work) => work.kind !== 'wait') ? 'running' : 'waiting';
}

/**
 * The state of an instance that its caller keeps between decisions (derived state: a decision
 * then costs what it adds, not a replay of the whole history). The decision advances `state` by
 * the events it makes, so a caller keeps it only once those are committed; `history` reads the
 * committed history, for the rare decision that must start over (the history's limit).
 */
export interface KeptState {
  state: InstanceState;
  history(): readonly HistoryEvent[];
}

/** One decision, at once; see the file header. */
export function decide(definition: Definition, history: readonly HistoryEvent[] | KeptState, options: DecideOptions): Decision {
  return drain(decideWalk(definition, history, options));
}

/**
 * One decision as a walk that yields between batches of steps (the service runs it in slices),
 * from the history (replayed) or from a kept state (advanced in place).
 */
export function* decideWalk(definition: Definition, from: readonly HistoryEvent[] | KeptState, options: DecideOptions): Walk<Decision> {
  const kept = isKept(from);
  const fresh = () => replay(kept ? from.history() : from);
  const state = kept ? from.state : fresh();
  const alreadyFinished = state.finished !== null;
  // Sequences run from 1 without gaps: the last one counts the history.
  const committed = state.lastSequence;
  const first = yield* attempt(definition, state, options);
  const total = committed + first.newEvents.length;
  const limit = options.limits?.historyEvents ?? LIMITS.historyEvents;
  if (alreadyFinished || total < limit || (state.finished && total === limit)) return first.decision;
  // The history would reach its limit with the instance still open: only the failure is recorded.
  const failure = options.limits ? `history limit reached: more than ${limit} events (${LIMIT_FLAGS.historyEvents})` : 'history limit reached';
  const forced = yield* attempt(definition, fresh(), options, failure);
  // The kept state follows the events that are returned, not those of the first attempt.
  Object.assign(state, forced.state);
  return forced.decision;
}

const isKept = (from: readonly HistoryEvent[] | KeptState): from is KeptState => !Array.isArray(from);

function* attempt(definition: Definition, state: InstanceState, options: DecideOptions, forcedFailure?: string) {
  const { instance, inputs = [] } = options;
  const last = state.lastTimestamp ? Date.parse(state.lastTimestamp) : -Infinity;
  const stamp = new Date(Math.max(Date.parse(options.now), last)).toISOString();
  const newEvents: HistoryEvent[] = [];
  const emit = <T extends HistoryEventType>(type: T, step: string | null, data: HistoryEventData[T]) => {
    const event = { sequence: state.lastSequence + 1, type, step, data, timestamp: stamp } as HistoryEvent;
    applyEvent(state, event);
    newEvents.push(event);
  };
  const wasFinished = state.finished !== null;

  const pass = function* (): Walk<OpenWork[]> {
    if (!state.started || state.finished) return [];
    const walk = new Pass(definition, state, instance, stamp, emit, options.limits);
    const result = yield* walk.run();
    if (result.status === 'open') return walk.open;
    if (result.status === 'failed') {
      emit('OrchestratorFailed', result.step, { error: result.error });
      return [];
    }
    try {
      const output = capOutput(definition.output === undefined ? result.output : resolveDeep(definition.output, result.context, 'output'));
      emit('OrchestratorCompleted', null, output.truncated ? { output: output.value, output_truncated: true } : { output: output.value });
    } catch (err) {
      if (!(err instanceof ExpressionError)) throw err;
      emit('OrchestratorFailed', null, { error: err.message });
    }
    return [];
  };

  const before = yield* pass();
  let open = before;
  const resolved = new Set<string>();
  const fired = new Set<string>();
  if (forcedFailure) {
    // Only the start is kept (the instance's input belongs in its history); nothing runs.
    for (const input of inputs) if (input.type === 'start') handle(input, open, state, stamp, emit, resolved, fired);
    emit('OrchestratorFailed', null, { error: forcedFailure });
    open = [];
  }
  for (const input of forcedFailure ? [] : inputs) {
    if (state.finished) break;
    handle(input, open, state, stamp, emit, resolved, fired);
    open = yield* pass();
  }

  const commands: Command[] = [];
  const key = (work: OpenWork) => `${work.kind}:${work.step}:${work.kind === 'activity' || work.kind === 'retry' ? work.attempt : ''}:${timerOf(work) ?? ''}`;
  const beforeKeys = new Set(before.map(key));
  const afterKeys = new Set(open.map(key));
  for (const work of before) {
    if (afterKeys.has(key(work))) continue;
    if (work.kind === 'activity') {
      if (!resolved.has(`${work.step}#${work.attempt}`)) commands.push({ type: 'cancel_activity', step: work.step, attempt: work.attempt });
    } else if (timerOf(work) && !fired.has(work.step)) {
      commands.push({ type: 'cancel_timer', step: work.step });
    }
  }
  for (const work of open) {
    if (beforeKeys.has(key(work))) continue;
    if (work.kind === 'activity') commands.push(work.command);
    else {
      const fireAt = timerOf(work);
      if (fireAt) commands.push({ type: 'create_timer', step: work.step, fire_at: fireAt });
    }
  }
  if (state.finished && !wasFinished) {
    const { status, output, error, step } = state.finished;
    commands.push({ type: 'finish', status, output, error, failed_step: step });
  }
  return { state, newEvents, decision: { newEvents, commands, status: statusOf(state, open), open } satisfies Decision };
}

/** Records one input as history events, or ignores it when it is stale. */
function handle(input: DecideInput, open: OpenWork[], state: InstanceState, stamp: string, emit: Emit, resolved: Set<string>, fired: Set<string>): void {
  switch (input.type) {
    case 'start':
      if (!state.started) emit('OrchestratorStarted', null, { input: input.input });
      return;
    case 'terminate':
      emit('OrchestratorTerminated', null, { reason: input.reason });
      return;
    case 'event_raised':
      emit('EventRaised', null, { name: input.name, data: input.data });
      return;
    case 'timer_fired': {
      const due = open.find((work) => {
        const fireAt = work.step === input.step ? timerOf(work) : null;
        return fireAt !== null && Date.parse(fireAt) <= Date.parse(stamp);
      });
      if (!due) return;
      fired.add(input.step);
      emit('TimerFired', input.step, {});
      return;
    }
  }
  // An activity input counts only for the attempt that is open now; anything else is stale
  // (a cancelled attempt finishing, a result reported twice).
  const work = open.find((entry): entry is Extract<OpenWork, { kind: 'activity' }> => entry.kind === 'activity' && entry.step === input.step && entry.attempt === input.attempt);
  if (!work) return;
  const { step, attempt } = input;
  if (input.type === 'activity_started') {
    if (work.phase === 'scheduled') emit('ActivityStarted', step, { attempt });
    return;
  }
  resolved.add(`${step}#${attempt}`);
  const fail = (error: string, extra: { exit_code?: number; stderr?: string; immediate?: boolean; final?: boolean } = {}) => {
    const { policy } = work;
    const retry = !extra.final && attempt < policy.max_attempts && !policy.non_retryable_errors.some((text) => error.includes(text));
    const details = { ...(extra.exit_code !== undefined && { exit_code: extra.exit_code }), ...(extra.stderr !== undefined && { stderr: tailUtf8(extra.stderr, LIMITS.stderrBytes) }) };
    const retryAt = retry ? new Date(Date.parse(stamp) + (extra.immediate ? 0 : backoffMs(policy, attempt))).toISOString() : undefined;
    emit('ActivityFailed', step, { attempt, error, ...details, ...(retryAt && { retry_at: retryAt }) });
  };
  if (input.type === 'activity_interrupted') return fail(INTERRUPTED, { immediate: true, final: !work.retry_on_interrupt });
  if (input.type === 'activity_failed') return fail(input.error, { exit_code: input.exit_code, stderr: input.stderr });
  const stderr = input.stderr === undefined ? null : tailUtf8(input.stderr, LIMITS.stderrBytes);
  let value: JsonValue;
  if (work.command.kind === 'call') value = input.value ?? null;
  else {
    if (input.exit_code !== undefined && input.exit_code !== 0) {
      const lastLine = (input.stderr ?? '').trim().split('\n').at(-1)?.slice(0, 200);
      return fail(`exit code ${input.exit_code}${lastLine ? `: ${lastLine}` : ''}`, { exit_code: input.exit_code, stderr: input.stderr ?? '' });
    }
    value = input.stdout ?? '';
    if (work.command.output === 'json') {
      if (textDeeperThan(input.stdout ?? '')) return fail(`output is ${TOO_DEEP}`, { exit_code: input.exit_code ?? 0, stderr: input.stderr ?? '' });
      try {
        value = JSON.parse(input.stdout ?? '') as JsonValue;
      } catch (err) {
        return fail(`output is not JSON: ${(err as Error).message}`, { exit_code: input.exit_code ?? 0, stderr: input.stderr ?? '' });
      }
    }
  }
  const output = capOutput(value);
  emit('ActivityCompleted', step, {
    attempt,
    output: output.value,
    exit_code: input.exit_code ?? null,
    duration_ms: input.duration_ms,
    stderr,
    ...(output.truncated && { output_truncated: true as const }),
  });
}

/** What an instance waits for, from its history alone: what a restart re-arms. */
export function openWork(definition: Definition, history: readonly HistoryEvent[], instance: InstanceMeta): OpenWork[] {
  const now = history.at(-1)?.timestamp ?? new Date(0).toISOString();
  return decide(definition, history, { instance, now }).open;
}
