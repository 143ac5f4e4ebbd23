import { describe, expect, it } from 'vitest';
import { decide, definitionProblems, ExpressionError, parseTemplate, projectInstance, validateDefinition, type JsonValue } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { META, prng } from '../../../../../helpers/orchestration-sim.js';

/** Mutates a JSON value at random (`rate`: how often per node): drops, replaces or adds fields and items. */
function mutate(value: JsonValue, random: () => number, rate: number): JsonValue {
  const odd: JsonValue[] = [null, 0, -1, 1.5, '', 'x', '${', '${input.a}', '${steps.a.output}', '${item}', [], {}, true, '1s', 'eq', [{}], { path: 'input' }];
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  if (random() < rate) return pick(odd);
  if (Array.isArray(value)) {
    const out = value.map((item) => mutate(item, random, rate));
    if (random() < rate) out.push(pick(odd));
    if (random() < rate) out.splice(Math.floor(random() * out.length), 1);
    return out;
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, JsonValue> = {};
    for (const [key, child] of Object.entries(value)) if (random() > rate) out[key] = mutate(child, random, rate);
    if (random() < rate) out[pick(['id', 'type', 'when', 'steps', 'branches', 'value', 'x'])] = pick(odd);
    return out;
  }
  return value;
}

const SEED_DEFINITION: JsonValue = {
  name: 'fuzz',
  defaults: { timeout_ms: 1000, retry_policy: { max_attempts: 2 } },
  steps: [
    { id: 'a', type: 'activity', output: 'json', run: { command: ['echo', '${input.a}'], env: { X: '${input.a}' } } },
    { id: 'm', type: 'map', items: '${input.list}', max_concurrency: 2, step: { type: 'set', value: { i: '${item}', n: '${index}' } } },
    { id: 'p', type: 'parallel', branches: { b: [{ id: 't', type: 'timer', duration: '1s' }], c: [{ id: 'w', type: 'wait_for_event', event: 'go', timeout: '1m', on_timeout: 'continue' }] } },
    { id: 'c', type: 'activity', when: { all: [{ path: 'steps.a.output.ok', op: 'eq', value: true }, { not: { path: 'input.a', op: 'exists' } }] }, call: { class: 'k', object_id: '${input.a}', method: 'm' } },
    { id: 's', type: 'set', value: ['${steps.m.output}', '${steps.p.output}'] },
  ],
  output: '${steps.s.output}',
};

describe('orchestration validation and decide under mutated input (seeded)', () => {
  it('never throws: a definition is refused with problems, or it runs', () => {
    let accepted = 0;
    for (let seed = 1; seed <= 1500; seed += 1) {
      const random = prng(seed);
      const raw = mutate(SEED_DEFINITION, random, seed % 2 === 0 ? 0.05 : 0.005);
      const problems = definitionProblems(raw);
      expect(Array.isArray(problems), `seed ${seed}`).toBe(true);
      for (const problem of problems) expect(problem, `seed ${seed}`).toMatch(/^[a-z_[\]0-9.A-Z-]+: \S/);
      if (problems.length > 0) continue;
      accepted += 1;
      const definition = validateDefinition(raw);
      const input = mutate({ a: 1, list: [1, 2, 3] }, random, 0.2);
      const started = decide(definition, [], { instance: META, now: '2026-01-01T00:00:00.000Z', inputs: [{ type: 'start', input }] });
      const history = started.newEvents;
      for (const command of started.commands) {
        if (command.type !== 'schedule_activity') continue;
        const result = decide(definition, history, {
          instance: META,
          now: '2026-01-01T00:00:01.000Z',
          inputs: [{ type: 'activity_completed', step: command.step, attempt: command.attempt, duration_ms: 1, stdout: '{"ok":true}', exit_code: 0, value: null }],
        });
        history.push(...result.newEvents);
      }
      expect(() => projectInstance(definition, history, META), `seed ${seed}`).not.toThrow();
    }
    expect(accepted).toBeGreaterThan(100);
  });
});

describe('expression parsing of random text (seeded)', () => {
  it('parses or refuses with an ExpressionError, nothing else', () => {
    const alphabet = ['$', '{', '}', '.', '[', ']', '0', 'a', 'input', 'steps', ' ', '-', '_', '$${', '${'];
    for (let seed = 1; seed <= 3000; seed += 1) {
      const random = prng(seed);
      const text = Array.from({ length: Math.floor(random() * 12) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      try {
        parseTemplate(text);
      } catch (err) {
        expect(err, `${seed}: ${text}`).toBeInstanceOf(ExpressionError);
      }
    }
  });
});
