/**
 * What an instance looks like, from its definition snapshot and history alone: its status,
 * output, error, `steps[]` and `waiting_for` (docs/decisions.md, "Orchestrations
 * (interpreter)"). The service adds its own columns (id, name, definition_version,
 * created_at, updated_at) and, when asked, the history.
 *
 * `steps[]` lists every step the interpreter walked, in definition order, a container before
 * the steps inside it (`checks`, `checks.lint.lint`, ...; map items as `each[0]`, ...), plus
 * the not yet reached steps of a list as `pending`. A step left open or unreached when the
 * instance failed or was terminated, or inside a container that failed fast, is `cancelled`.
 */
import type { Definition, JsonValue, Step, StepType } from './dsl.js';
import { drain, Pass, YIELD_EVERY, type InstanceMeta, type TraceEntry, type Walk, type WorkLimits } from './drive.js';
import type { HistoryEvent } from './history.js';
import { statusOf, type InstanceStatus } from './decide.js';
import { applyEvent, replay, type ActivityRecord, type InstanceState, type StepRecord } from './state.js';

export type StepStatus = 'pending' | 'scheduled' | 'running' | 'retrying' | 'completed' | 'failed' | 'skipped' | 'waiting' | 'cancelled';

/** A type alias, not an interface, so that it is assignable to the wire schema's open step object. */
export type StepView = {
  /** The step path (`list`, `checks.lint.lint`, `each[3]`). */
  id: string;
  type: StepType;
  status: StepStatus;
  attempts?: number;
  started_at?: string | null;
  completed_at?: string | null;
  exit_code?: number | null;
  output?: JsonValue;
  output_truncated?: true;
  error?: string;
  /** wait_for_event: the event it waits for, and its deadline when it has a timeout. */
  event?: string;
  deadline?: string | null;
  /** timer: when it fires; an activity waiting out a back-off: when it is retried. */
  fire_at?: string;
  retry_at?: string;
};

export interface InstanceProjection {
  status: InstanceStatus;
  input: JsonValue;
  output: JsonValue;
  output_truncated?: true;
  error: string | null;
  failed_step: string | null;
  started_at: string | null;
  completed_at: string | null;
  steps: StepView[];
  /** Event names the open waits wait for, in definition order, without repeats. */
  waiting_for: string[];
}

/** The step at a step path of `definition` (`checks.lint.lint`, `each[3]`), or undefined. */
export function stepAt(definition: Definition, path: string): Step | undefined {
  const tokens = path.match(/\[\d+\]|[^.[\]]+/g) ?? [];
  let list: Step[] | undefined = definition.steps;
  let current: Step | undefined;
  for (const token of tokens) {
    if (token.startsWith('[')) {
      if (current?.type !== 'map') return undefined;
      current = { ...current.step, id: current.step.id ?? current.id };
      list = undefined;
    } else if (list) {
      current = list.find((step) => step.id === token);
      list = undefined;
    } else if (current?.type === 'parallel') {
      list = current.branches[token];
      if (!list) return undefined;
      current = undefined;
    } else return undefined;
    if (!current && !list) return undefined;
  }
  return list ? undefined : current;
}

function activityView(activity: ActivityRecord): Partial<StepView> {
  return {
    attempts: activity.attempt,
    started_at: activity.started_at,
    completed_at: activity.finished_at,
    exit_code: activity.exit_code,
    ...(activity.phase === 'completed' && { output: activity.output }),
    ...(activity.output_truncated && { output_truncated: true as const }),
    ...(activity.error !== null && activity.phase !== 'completed' && { error: activity.error }),
    ...(activity.phase === 'retrying' && activity.retry_at && { retry_at: activity.retry_at }),
  };
}

function openStatus(step: Step, record: StepRecord | undefined): StepStatus {
  if (step.type === 'wait_for_event') return 'waiting';
  if (step.type === 'timer') return 'scheduled';
  if (step.type !== 'activity') return 'running';
  const phase = record?.activity?.phase;
  return phase === 'running' ? 'running' : phase === 'retrying' ? 'retrying' : 'scheduled';
}

function view(entry: TraceEntry, state: InstanceState, cancelled: boolean): StepView {
  const { path, step, outcome } = entry;
  const record = state.steps.get(path);
  const base: StepView = { id: path, type: step.type, status: 'pending' };
  if (record?.activity) Object.assign(base, activityView(record.activity));
  if (step.type === 'wait_for_event') Object.assign(base, { event: step.event, deadline: record?.timer?.fire_at ?? null });
  if (step.type === 'timer' && record?.timer) base.fire_at = record.timer.fire_at;
  switch (outcome.status) {
    case 'completed':
      return { ...base, status: 'completed', output: outcome.facts.output, ...(step.type !== 'activity' && { completed_at: completedAt(record) }) };
    case 'skipped':
      return { ...base, status: 'skipped', output: null };
    case 'failed':
      return { ...base, status: 'failed', error: outcome.error };
    case 'open':
      return { ...base, status: cancelled ? 'cancelled' : openStatus(step, record) };
    case 'pending':
      return { ...base, status: cancelled ? 'cancelled' : 'pending' };
  }
}

const completedAt = (record: StepRecord | undefined): string | null => record?.consumed?.at ?? record?.timer?.fired_at ?? null;

/** The projection of an instance, at once; see the file header. */
export function projectInstance(definition: Definition, history: readonly HistoryEvent[], instance: InstanceMeta, limits?: WorkLimits): InstanceProjection {
  return drain(projectionWalk(definition, history, instance, limits));
}

/** The projection as a walk that yields between batches of steps (the service runs it in slices). */
export function* projectionWalk(definition: Definition, history: readonly HistoryEvent[], instance: InstanceMeta, limits?: WorkLimits): Walk<InstanceProjection> {
  const state = replay(history);
  // A walk on a scratch state: at the history's fixed point it emits nothing, and what it would
  // emit on a finished instance (nothing is decided after the end) must not reach `state`.
  const scratch = replay(history);
  scratch.finished = null;
  const stamp = state.lastTimestamp ?? new Date(0).toISOString();
  const walk = new Pass(definition, scratch, instance, stamp, (type, step, data) =>
    applyEvent(scratch, { sequence: scratch.lastSequence + 1, type, step, data, timestamp: stamp } as HistoryEvent),
    limits,
  );
  if (state.started) yield* walk.run();
  const finished = state.finished;
  const ended = finished !== null && finished.status !== 'completed';
  const traced = new Set(walk.trace.map((entry) => entry.path));
  // What a failed container left open was cancelled with it, even when the instance goes on.
  const failed = walk.trace.filter((entry) => entry.outcome.status === 'failed' && (entry.step.type === 'parallel' || entry.step.type === 'map')).map((entry) => entry.path);
  const dropped = (path: string) => failed.some((container) => path.startsWith(`${container}.`) || path.startsWith(`${container}[`));
  const steps: StepView[] = [];
  for (const entry of walk.trace) {
    steps.push(view(entry, state, ended || dropped(entry.path)));
    if (steps.length % (YIELD_EVERY * 16) === 0) yield;
  }
  // Work the walk no longer reaches (inside a container that failed fast) was cancelled.
  for (const [path, record] of state.steps) {
    if (traced.has(path) || !record.activity || ['completed', 'failed'].includes(record.activity.phase)) continue;
    const step = stepAt(definition, path);
    if (step) steps.push({ id: path, type: step.type, ...activityView(record.activity), status: 'cancelled' });
  }
  const open = finished ? [] : walk.open;
  return {
    status: statusOf(state, open),
    input: state.started?.input ?? null,
    output: finished?.output ?? null,
    ...(history.some((event) => event.type === 'OrchestratorCompleted' && event.data.output_truncated) && { output_truncated: true as const }),
    error: finished?.error ?? null,
    failed_step: finished?.status === 'failed' ? finished.step : null,
    started_at: state.started?.at ?? null,
    completed_at: finished?.at ?? null,
    steps,
    waiting_for: [...new Set(open.flatMap((work) => (work.kind === 'wait' ? [work.event] : [])))],
  };
}
