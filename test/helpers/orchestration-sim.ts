/**
 * A simulated service for the orchestration interpreter: a virtual clock, activities that take
 * and give what a seeded script says, timers, raised events and terminate. It runs `decide()`
 * the way the real service does (decide -> commit -> carry out commands -> report results).
 *
 * `mode: 'replay'` throws the simulator's in-memory tasks and timers away after every commit
 * and rebuilds them from the history alone (`openWork`), as a restart does; `mode: 'crash'`
 * also loses running activities at chosen commits (reported as interrupted, as the real
 * restart does).
 */
import { isDeepStrictEqual } from 'node:util';
import { decide, openWork, replay, type Command, type DecideInput, type Definition, type HistoryEvent, type InstanceMeta, type JsonValue, type KeptState } from '../../src/services/durable/orchestrations/interpreter/index.js';

/** mulberry32: a small seeded PRNG, so that a failing seed reproduces. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A number in [0, 1) fixed by the seed and a text (FNV-1a mixed into the seed). */
export function hashUnit(seed: number, text: string): number {
  let hash = 0x811c9dc5 ^ seed;
  for (let index = 0; index < text.length; index += 1) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193);
  return prng(hash >>> 0)();
}

export type ActivityScript = (step: string, attempt: number, command: Extract<Command, { type: 'schedule_activity' }>) => {
  duration_ms: number;
  result: { ok: true; stdout?: string; value?: JsonValue; exit_code?: number } | { ok: false; error: string };
};

export interface SimulationOptions {
  definition: Definition;
  input?: JsonValue;
  activities: ActivityScript;
  /** External happenings at virtual times (ms after the start). */
  raise?: { at: number; name: string; data: JsonValue }[];
  terminateAt?: number;
  /**
   * memory: each decision replays the history; kept: each decides from the state the last one
   * left (as the service does), checked against a replay after every commit; replay: the
   * restart's rebuild after every commit; crash: a rebuild that loses running attempts.
   */
  mode?: 'memory' | 'kept' | 'replay' | 'crash';
  /** mode crash: whether to crash after the commit with this index (0 = first). */
  crashAfter?: (commit: number) => boolean;
  maxCommits?: number;
}

export interface SimulationResult {
  history: HistoryEvent[];
  commands: Command[][];
  finished: Extract<Command, { type: 'finish' }> | undefined;
  commits: number;
}

interface Task {
  step: string;
  attempt: number;
  scheduledAt: number;
  started: boolean;
  command: Extract<Command, { type: 'schedule_activity' }>;
}

export const START = Date.parse('2026-01-01T00:00:00.000Z');
export const META: InstanceMeta = { id: 'inst-1', name: 'sim' };

/** Runs one instance to its end (or to maxCommits); see the file header. */
export function simulate(options: SimulationOptions): SimulationResult {
  const { definition, activities, mode = 'memory' } = options;
  const history: HistoryEvent[] = [];
  const allCommands: Command[][] = [];
  let tasks = new Map<string, Task>();
  let timers = new Map<string, number>();
  const raises = [...(options.raise ?? [])].sort((a, b) => a.at - b.at);
  let raised = 0;
  let terminated = options.terminateAt === undefined;
  let finished: Extract<Command, { type: 'finish' }> | undefined;
  let now = START;
  let commits = 0;
  const restartInputs: DecideInput[] = [];

  const kept: KeptState = { state: replay([]), history: () => history };
  const commit = (inputs: DecideInput[]) => {
    const decision = decide(definition, mode === 'kept' ? kept : history, { instance: META, now: new Date(now).toISOString(), inputs });
    history.push(...decision.newEvents);
    if (mode === 'kept' && !isDeepStrictEqual(kept.state, replay(history))) throw new Error(`the kept state differs from a replay after commit ${commits}`);
    allCommands.push(decision.commands);
    for (const command of decision.commands) {
      if (command.type === 'schedule_activity') tasks.set(`${command.step}#${command.attempt}`, { step: command.step, attempt: command.attempt, scheduledAt: now, started: false, command });
      else if (command.type === 'create_timer') timers.set(command.step, Date.parse(command.fire_at));
      else if (command.type === 'cancel_activity') tasks.delete(`${command.step}#${command.attempt}`);
      else if (command.type === 'cancel_timer') timers.delete(command.step);
      else if (command.type === 'finish') finished = command;
    }
    const crash = mode === 'crash' && options.crashAfter?.(commits);
    commits += 1;
    if (mode === 'replay' || crash) rebuild(crash === true);
  };

  /** The restart: task and timer state from the history alone; a crash loses running attempts. */
  const rebuild = (crash: boolean) => {
    // A committed history is at its fixed point: deciding again with nothing new decides nothing.
    const again = decide(definition, history, { instance: META, now: new Date(now).toISOString(), inputs: [] });
    if (again.newEvents.length > 0 || again.commands.length > 0) throw new Error(`not at a fixed point after commit ${commits}: ${JSON.stringify(again)}`);
    tasks = new Map();
    timers = new Map();
    for (const work of openWork(definition, history, META)) {
      if (work.kind === 'activity') {
        if (crash && work.phase === 'running') restartInputs.push({ type: 'activity_interrupted', step: work.step, attempt: work.attempt });
        else tasks.set(`${work.step}#${work.attempt}`, { step: work.step, attempt: work.attempt, scheduledAt: Date.parse(work.scheduled_at), started: work.phase === 'running', command: work.command });
      } else if (work.kind === 'wait') {
        if (work.deadline) timers.set(work.step, Date.parse(work.deadline));
      } else timers.set(work.step, Date.parse(work.fire_at));
    }
  };

  commit([{ type: 'start', input: options.input ?? null }]);
  while (!finished && commits < (options.maxCommits ?? 5000)) {
    if (restartInputs.length > 0) {
      commit([restartInputs.shift()!]);
      continue;
    }
    // The next happening: earliest time first; ties in a fixed order of kind and key.
    const candidates: { at: number; order: string; input: DecideInput; apply?: () => void }[] = [];
    for (const [key, task] of tasks) {
      const plan = activities(task.step, task.attempt, task.command);
      if (!task.started) candidates.push({ at: task.scheduledAt + 1, order: `1${key}`, input: { type: 'activity_started', step: task.step, attempt: task.attempt }, apply: () => (task.started = true) });
      else {
        const done = plan.result;
        const input: DecideInput = done.ok
          ? { type: 'activity_completed', step: task.step, attempt: task.attempt, duration_ms: plan.duration_ms, stdout: done.stdout, exit_code: done.exit_code, value: done.value, stderr: '' }
          : { type: 'activity_failed', step: task.step, attempt: task.attempt, error: done.error };
        candidates.push({ at: task.scheduledAt + Math.max(2, plan.duration_ms), order: `2${key}`, input, apply: () => tasks.delete(key) });
      }
    }
    for (const [step, at] of timers) candidates.push({ at, order: `3${step}`, input: { type: 'timer_fired', step }, apply: () => timers.delete(step) });
    const nextRaise = raises[raised];
    if (nextRaise) candidates.push({ at: START + nextRaise.at, order: '4', input: { type: 'event_raised', name: nextRaise.name, data: nextRaise.data }, apply: () => (raised += 1) });
    if (!terminated) candidates.push({ at: START + options.terminateAt!, order: '5', input: { type: 'terminate', reason: 'terminated by request' }, apply: () => (terminated = true) });
    if (candidates.length === 0) break;
    candidates.sort((a, b) => a.at - b.at || (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
    const next = candidates[0]!;
    now = Math.max(now, next.at);
    next.apply?.();
    commit([next.input]);
  }
  return { history, commands: allCommands, finished, commits };
}
