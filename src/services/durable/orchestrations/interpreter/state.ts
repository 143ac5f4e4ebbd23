/**
 * The state of an instance rebuilt from its history alone (replay). `applyEvent` is the only
 * place that interprets an event; `decide()` applies the events it makes as it makes them, so
 * what it sees is always what a replay of the history would see.
 */
import type { JsonValue } from './dsl.js';
import type { HistoryEvent } from './history.js';

export type ActivityPhase = 'scheduled' | 'running' | 'retrying' | 'retry_due' | 'completed' | 'failed';

export interface ActivityRecord {
  attempt: number;
  phase: ActivityPhase;
  first_scheduled_at: string;
  scheduled_at: string;
  started_at: string | null;
  finished_at: string | null;
  output: JsonValue;
  output_truncated: boolean;
  exit_code: number | null;
  stderr: string | null;
  error: string | null;
  retry_at: string | null;
}

/** What the history says about one step path. */
export interface StepRecord {
  skipped?: { at: string };
  activity?: ActivityRecord;
  /** A timer step's timer, or a wait's deadline. */
  timer?: { created_at: string; fire_at: string; fired_at: string | null };
  /** The event a wait consumed. */
  consumed?: { name: string; data: JsonValue; raised_sequence: number; at: string };
}

export interface RaisedEvent {
  sequence: number;
  name: string;
  data: JsonValue;
  at: string;
  consumed_by: string | null;
}

export type FinalStatus = 'completed' | 'failed' | 'terminated';

export interface InstanceState {
  started: { input: JsonValue; at: string } | null;
  finished: { status: FinalStatus; output: JsonValue; error: string | null; step: string | null; at: string } | null;
  steps: Map<string, StepRecord>;
  /** Raised events in raise order. */
  events: RaisedEvent[];
  lastSequence: number;
  lastTimestamp: string | null;
}

export const emptyState = (): InstanceState => ({ started: null, finished: null, steps: new Map(), events: [], lastSequence: 0, lastTimestamp: null });

function record(state: InstanceState, path: string): StepRecord {
  let found = state.steps.get(path);
  if (!found) state.steps.set(path, (found = {}));
  return found;
}

/** Folds one event into `state`. */
export function applyEvent(state: InstanceState, event: HistoryEvent): void {
  state.lastSequence = event.sequence;
  state.lastTimestamp = event.timestamp;
  const at = event.timestamp;
  const step = event.step ?? '';
  switch (event.type) {
    case 'OrchestratorStarted':
      state.started = { input: event.data.input, at };
      return;
    case 'ActivityScheduled': {
      const entry = record(state, step);
      entry.activity = {
        attempt: event.data.attempt,
        phase: 'scheduled',
        first_scheduled_at: entry.activity?.first_scheduled_at ?? at,
        scheduled_at: at,
        started_at: entry.activity?.started_at ?? null,
        finished_at: null,
        output: null,
        output_truncated: false,
        exit_code: null,
        stderr: null,
        error: null,
        retry_at: null,
      };
      return;
    }
    case 'ActivityStarted': {
      const activity = record(state, step).activity;
      if (activity) Object.assign(activity, { phase: 'running', started_at: activity.started_at ?? at });
      return;
    }
    case 'ActivityCompleted': {
      const activity = record(state, step).activity;
      if (!activity) return;
      Object.assign(activity, {
        phase: 'completed',
        finished_at: at,
        output: event.data.output,
        output_truncated: event.data.output_truncated === true,
        exit_code: event.data.exit_code,
        stderr: event.data.stderr,
        error: null,
      });
      return;
    }
    case 'ActivityFailed': {
      const activity = record(state, step).activity;
      if (!activity) return;
      const retry_at = event.data.retry_at ?? null;
      Object.assign(activity, {
        // A retry due at once (no back-off) needs no timer.
        phase: !retry_at ? 'failed' : Date.parse(retry_at) <= Date.parse(at) ? 'retry_due' : 'retrying',
        finished_at: retry_at ? null : at,
        error: event.data.error,
        exit_code: event.data.exit_code ?? null,
        stderr: event.data.stderr ?? null,
        retry_at,
      });
      return;
    }
    case 'TimerCreated':
      record(state, step).timer = { created_at: at, fire_at: event.data.fire_at, fired_at: null };
      return;
    case 'TimerFired': {
      const entry = record(state, step);
      // A retry's back-off timer fires into the activity; a timer step's or a wait's into its timer.
      if (entry.activity?.phase === 'retrying') entry.activity.phase = 'retry_due';
      else if (entry.timer) entry.timer.fired_at = at;
      return;
    }
    case 'EventRaised':
      state.events.push({ sequence: event.sequence, name: event.data.name, data: event.data.data, at, consumed_by: null });
      return;
    case 'EventConsumed': {
      const raised = state.events.find((candidate) => candidate.sequence === event.data.raised_sequence);
      if (raised) raised.consumed_by = step;
      record(state, step).consumed = { name: event.data.name, data: raised?.data ?? null, raised_sequence: event.data.raised_sequence, at };
      return;
    }
    case 'StepSkipped':
      record(state, step).skipped = { at };
      return;
    case 'OrchestratorCompleted':
      state.finished = { status: 'completed', output: event.data.output, error: null, step: null, at };
      return;
    case 'OrchestratorFailed':
      state.finished = { status: 'failed', output: null, error: event.data.error, step: event.step, at };
      return;
    case 'OrchestratorTerminated':
      state.finished = { status: 'terminated', output: null, error: event.data.reason, step: null, at };
      return;
  }
}

/** The state after `history`. */
export function replay(history: readonly HistoryEvent[]): InstanceState {
  const state = emptyState();
  for (const event of history) applyEvent(state, event);
  return state;
}
