import { describe, expect, it } from 'vitest';
import { validateDefinition, type Definition, type HistoryEvent, type JsonObject } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { hashUnit, prng, simulate, type ActivityScript, type SimulationOptions } from '../../../../../helpers/orchestration-sim.js';

const EVENTS = ['go', 'stop', 'data'];

/** A random definition: a tree of every step type, with retries, timers, waits, parallel and map. */
function randomDefinition(random: () => number, name: string): Definition {
  let counter = 0;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const id = () => `s${(counter += 1)}`;
  const step = (depth: number, inMap: boolean): JsonObject => {
    const kinds = depth >= 2 ? ['activity', 'activity', 'timer', 'wait_for_event', 'set'] : ['activity', 'activity', 'timer', 'wait_for_event', 'set', 'parallel', 'map'];
    const kind = pick(kinds);
    const base: JsonObject = { id: id(), type: kind };
    if (random() < 0.2) base.on_error = 'continue';
    if (random() < 0.1) base.when = { path: 'input.flag', op: 'truthy' };
    switch (kind) {
      case 'activity':
        if (random() < 0.2) return { ...base, call: { class: 'counter', object_id: inMap ? 'o-${index}' : 'o', method: 'inc', args: { by: 1 } } };
        return {
          ...base,
          run: { command: ['work', inMap ? '${item}' : 'x'] },
          output: random() < 0.3 ? 'json' : 'text',
          retry_policy: { max_attempts: 1 + Math.floor(random() * 3), initial_interval_ms: pick([0, 500, 2000]), backoff_coefficient: 2, max_interval_ms: 5000 },
          ...(random() < 0.2 && { retry_on_interrupt: false }),
        };
      case 'timer':
        return { ...base, duration: `${1 + Math.floor(random() * 5)}s` };
      case 'wait_for_event':
        return { ...base, event: pick(EVENTS), ...(random() < 0.6 && { timeout: `${2 + Math.floor(random() * 20)}s`, on_timeout: pick(['fail', 'continue']) }) };
      case 'set':
        return { ...base, value: { n: inMap ? '${index}' : 1, input: '${input}' } };
      case 'parallel': {
        const branches: JsonObject = {};
        for (let index = 0; index < 2 + Math.floor(random() * 2); index += 1) branches[`b${index}`] = list(depth + 1, inMap, 1 + Math.floor(random() * 2));
        return { ...base, branches, fail_fast: random() < 0.5 };
      }
      default:
        return { ...base, items: '${input.items}', max_concurrency: 1 + Math.floor(random() * 3), step: step(depth + 1, true) };
    }
  };
  const list = (depth: number, inMap: boolean, length: number): JsonObject[] => Array.from({ length }, () => step(depth, inMap));
  return validateDefinition({ name, steps: list(0, false, 2 + Math.floor(random() * 4)) });
}

/** Activities whose outcome and duration are fixed by the seed, the step path and the attempt. */
const script =
  (seed: number): ActivityScript =>
  (step, attempt, command) => {
    const roll = hashUnit(seed, `${step}#${attempt}`);
    const duration_ms = 100 + Math.floor(hashUnit(seed, `d${step}#${attempt}`) * 8000);
    if (roll < 0.2) return { duration_ms, result: { ok: false, error: `boom ${step}` } };
    if (roll < 0.25) return { duration_ms, result: { ok: true, stdout: 'partial', exit_code: 3 } };
    if (command.kind === 'call') return { duration_ms, result: { ok: true, value: { step, attempt } } };
    return { duration_ms, result: { ok: true, stdout: command.output === 'json' ? JSON.stringify({ step, attempt }) : `out ${step}`, exit_code: 0 } };
  };

function scenario(seed: number): Omit<SimulationOptions, 'mode'> {
  const random = prng(seed);
  const definition = randomDefinition(random, `def-${seed}`);
  const raise = Array.from({ length: Math.floor(random() * 6) }, () => ({ at: Math.floor(random() * 40_000), name: EVENTS[Math.floor(random() * EVENTS.length)]!, data: { seed } }));
  // Late events for the waits without a timeout, so that every run ends.
  for (const [index, name] of EVENTS.entries()) for (let round = 0; round < 12; round += 1) raise.push({ at: 500_000 + round * 1000 + index, name, data: { seed } });
  const items = Array.from({ length: Math.floor(random() * 6) }, (_, index) => `i${index}`);
  return {
    definition,
    input: { items, flag: random() < 0.5 },
    activities: script(seed),
    raise,
    ...(random() < 0.2 && { terminateAt: Math.floor(random() * 30_000) }),
  };
}

/** Invariants of every history: gap-free sequences, ordered timestamps, no completed step scheduled again. */
function checkHistory(history: HistoryEvent[]): void {
  history.forEach((event, index) => expect(event.sequence).toBe(index + 1));
  for (let index = 1; index < history.length; index += 1) expect(history[index]!.timestamp >= history[index - 1]!.timestamp).toBe(true);
  const completed = new Set<string>();
  for (const event of history) {
    if (event.type === 'ActivityScheduled') expect(completed.has(event.step!), `${event.step} scheduled after it completed`).toBe(false);
    if (event.type === 'ActivityCompleted') completed.add(event.step!);
  }
  const finals = history.filter((event) => ['OrchestratorCompleted', 'OrchestratorFailed', 'OrchestratorTerminated'].includes(event.type));
  expect(finals).toHaveLength(1);
  expect(history.at(-1)).toBe(finals[0]);
}

const SEEDS = Array.from({ length: 250 }, (_, index) => 1000 + index);

describe('orchestration replay (randomized, seeded)', () => {
  it.each(SEEDS)('seed %i: a run rebuilt from history after every commit, and one from kept state, equal the uninterrupted run', (seed) => {
    const base = scenario(seed);
    const memory = simulate({ ...base, mode: 'memory' });
    const replayed = simulate({ ...base, mode: 'replay' });
    expect(memory.finished, `seed ${seed} did not finish`).toBeDefined();
    checkHistory(memory.history);
    expect(replayed.history).toEqual(memory.history);
    expect(replayed.commands).toEqual(memory.commands);
    // Decided from the state the previous decision left, checked against a replay at every commit.
    const kept = simulate({ ...base, mode: 'kept' });
    expect(kept.history).toEqual(memory.history);
    expect(kept.commands).toEqual(memory.commands);
  });

  it.each(SEEDS.slice(0, 100))('seed %i: crashes that lose running activities still finish and never redo a completed step', (seed) => {
    const base = scenario(seed);
    const random = prng(seed * 7);
    const crashed = simulate({ ...base, mode: 'crash', crashAfter: () => random() < 0.3 });
    expect(crashed.finished, `seed ${seed} did not finish`).toBeDefined();
    checkHistory(crashed.history);
    for (const event of crashed.history) {
      if (event.type === 'ActivityFailed' && event.data.error === 'interrupted by server restart') {
        const scheduled = crashed.history.filter((other) => other.type === 'ActivityScheduled' && other.step === event.step);
        expect(scheduled.length).toBeGreaterThan(0);
      }
    }
  });

  it('the crash runs do lose running attempts, which are retried or fail the step', () => {
    let interrupted = 0;
    let retried = 0;
    for (const seed of SEEDS.slice(0, 100)) {
      const random = prng(seed * 7);
      const { history } = simulate({ ...scenario(seed), mode: 'crash', crashAfter: () => random() < 0.3 });
      for (const event of history) {
        if (event.type !== 'ActivityFailed' || event.data.error !== 'interrupted by server restart') continue;
        interrupted += 1;
        if (event.data.retry_at) retried += 1;
      }
    }
    expect(interrupted).toBeGreaterThan(20);
    expect(retried).toBeGreaterThan(0);
    expect(retried).toBeLessThan(interrupted);
  });

  it('covers every step type, retries, timers, waits, terminate and both outcomes over the seeds', () => {
    const seen = new Set<string>();
    for (const seed of SEEDS) {
      const { history, finished } = simulate({ ...scenario(seed), mode: 'memory' });
      for (const event of history) seen.add(event.type);
      seen.add(`finish:${finished!.status}`);
      if (history.some((event) => event.type === 'ActivityFailed' && event.data.retry_at)) seen.add('retry');
    }
    for (const expected of ['ActivityScheduled', 'ActivityStarted', 'ActivityCompleted', 'ActivityFailed', 'TimerCreated', 'TimerFired', 'EventRaised', 'EventConsumed', 'StepSkipped', 'retry', 'finish:completed', 'finish:failed', 'finish:terminated']) {
      expect(seen.has(expected), expected).toBe(true);
    }
  });
});
