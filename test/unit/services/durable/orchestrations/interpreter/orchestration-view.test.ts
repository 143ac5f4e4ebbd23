import { describe, expect, it } from 'vitest';
import { definitionHash, isInlineForm, projectInstance, stepAt, translateInline, validateDefinition } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { at, Run } from '../../../../../helpers/orchestration-run.js';
import { META } from '../../../../../helpers/orchestration-sim.js';

const activity = (id: string, extra: object = {}) => ({ id, type: 'activity', run: { command: ['echo', id] }, retry_policy: { max_attempts: 2, initial_interval_ms: 1000 }, ...extra });
const pipeline = {
  name: 'pipe',
  steps: [
    activity('list', { output: 'json' }),
    { id: 'each', type: 'map', items: '${steps.list.output}', max_concurrency: 1, step: { type: 'set', value: '${item}' } },
    { id: 'checks', type: 'parallel', branches: { lint: [activity('lint')], test: [activity('unit')] } },
    { id: 'approval', type: 'wait_for_event', event: 'approved', timeout: '1h' },
    { id: 'pause', type: 'timer', duration: '30s' },
  ],
};

describe('instance view', () => {
  it('lists walked steps in order with statuses, attempts, outputs and waiting_for', () => {
    const run = new Run(pipeline);
    run.start({ who: 'me' });
    run.decide([{ type: 'activity_started', step: 'list', attempt: 1 }]);
    run.complete('list', '["a","b"]');
    run.fail('checks.test.unit', 'flaky');
    let view = projectInstance(run.definition, run.history, META);
    expect(view.status).toBe('running');
    expect(view.steps.map((step) => [step.id, step.status])).toEqual([
      ['list', 'completed'],
      ['each', 'completed'],
      ['each[0]', 'completed'],
      ['each[1]', 'completed'],
      ['checks', 'running'],
      ['checks.lint.lint', 'scheduled'],
      ['checks.test.unit', 'retrying'],
      ['approval', 'pending'],
      ['pause', 'pending'],
    ]);
    expect(view.steps[0]).toEqual({ id: 'list', type: 'activity', status: 'completed', attempts: 1, started_at: at(1000), completed_at: at(2000), exit_code: 0, output: ['a', 'b'] });
    expect(view.steps[6]).toMatchObject({ attempts: 1, error: 'flaky', retry_at: at(4000) });
    expect(view.steps[1]).toMatchObject({ type: 'map', output: ['a', 'b'] });
    run.complete('checks.lint.lint', 'L');
    run.decide([{ type: 'timer_fired', step: 'checks.test.unit' }]);
    run.complete('checks.test.unit', 'U', 2);
    view = projectInstance(run.definition, run.history, META);
    expect(view.status).toBe('waiting');
    expect(view.waiting_for).toEqual(['approved']);
    expect(view.steps.find((step) => step.id === 'approval')).toEqual({ id: 'approval', type: 'wait_for_event', status: 'waiting', event: 'approved', deadline: at(3_606_000) });
    expect(view.steps.find((step) => step.id === 'checks.test.unit')).toMatchObject({ status: 'completed', attempts: 2, output: 'U' });
    run.decide([{ type: 'event_raised', name: 'approved', data: { ok: 1 } }]);
    run.decide([{ type: 'timer_fired', step: 'pause' }], 30_000);
    view = projectInstance(run.definition, run.history, META);
    expect(view).toMatchObject({ status: 'completed', input: { who: 'me' }, output: null, error: null, failed_step: null, started_at: at(0), completed_at: at(37_000), waiting_for: [] });
    expect(view.steps.find((step) => step.id === 'approval')).toMatchObject({ status: 'completed', output: { ok: 1 }, completed_at: at(7000) });
  });

  it('a terminated instance shows open and unreached steps as cancelled', () => {
    const run = new Run(pipeline);
    run.start();
    run.decide([{ type: 'terminate', reason: 'stop' }]);
    const view = projectInstance(run.definition, run.history, META);
    expect(view).toMatchObject({ status: 'terminated', error: 'stop', failed_step: null });
    expect(view.steps.map((step) => step.status)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
  });

  it('a failed instance names the failed step; work dropped by fail_fast is cancelled', () => {
    const run = new Run(pipeline);
    run.start();
    run.complete('list', '[]');
    run.decide([{ type: 'activity_started', step: 'checks.lint.lint', attempt: 1 }]);
    run.decide([{ type: 'activity_failed', step: 'checks.test.unit', attempt: 1, error: 'x', exit_code: 3 }]);
    run.decide([{ type: 'timer_fired', step: 'checks.test.unit' }]);
    run.fail('checks.test.unit', 'red', 2);
    const view = projectInstance(run.definition, run.history, META);
    expect(view).toMatchObject({ status: 'failed', error: 'red', failed_step: 'checks.test.unit' });
    expect(view.steps.map((step) => [step.id, step.status])).toEqual([
      ['list', 'completed'],
      ['each', 'completed'],
      ['checks', 'failed'],
      ['checks.lint.lint', 'cancelled'],
      ['checks.test.unit', 'failed'],
      ['approval', 'cancelled'],
      ['pause', 'cancelled'],
    ]);
  });

  it('work a failed container dropped is cancelled even when the instance goes on', () => {
    const run = new Run({
      name: 'p',
      steps: [
        { id: 'checks', type: 'parallel', on_error: 'continue', branches: { lint: [activity('lint')], test: [activity('unit', { retry_policy: { max_attempts: 1 } })] } },
        { id: 'after', type: 'wait_for_event', event: 'go' },
      ],
    });
    run.start();
    run.fail('checks.test.unit', 'red');
    const view = projectInstance(run.definition, run.history, META);
    expect(view.status).toBe('waiting');
    expect(view.steps.map((step) => [step.id, step.status])).toEqual([
      ['checks', 'failed'],
      ['checks.lint.lint', 'cancelled'],
      ['checks.test.unit', 'failed'],
      ['after', 'waiting'],
    ]);
  });

  it('pending before the start', () => {
    const run = new Run(pipeline);
    expect(projectInstance(run.definition, [], META)).toMatchObject({ status: 'pending', steps: [], started_at: null });
  });

  it('stepAt finds nested steps by their path', () => {
    const definition = validateDefinition(pipeline);
    expect(stepAt(definition, 'checks.test.unit')).toMatchObject({ id: 'unit', type: 'activity' });
    expect(stepAt(definition, 'each[7]')).toMatchObject({ id: 'each', type: 'set' });
    expect(stepAt(definition, 'checks')).toMatchObject({ type: 'parallel' });
    for (const path of ['nope', 'checks.nope.unit', 'checks.test', 'list[0]', 'list.x', '']) expect(stepAt(definition, path), path).toBeUndefined();
  });
});

describe('agentkernel inline form', () => {
  it('is recognised by activity, activities or wait_for_event in input', () => {
    expect(isInlineForm({ activities: [] })).toBe(true);
    expect(isInlineForm({ activity: {} })).toBe(true);
    expect(isInlineForm({ wait_for_event: 'go' })).toBe(true);
    expect(isInlineForm({ sandbox: 'x' })).toBe(false);
    expect(isInlineForm([1])).toBe(false);
  });

  it('translates activities to run steps with their retry policy, then the wait; output is the last stdout', () => {
    const { definition, input } = translateInline('adhoc', {
      activities: [{ name: 'fetch', command: ['curl', 'x'], image: 'alpine:3', retry_policy: { max_attempts: 3 } }, { command: 'echo done | wc -c' }],
      wait_for_event: { name: 'ok', timeout: '5m' },
      repo: 'r',
    });
    expect(definition).toEqual({
      name: 'adhoc',
      steps: [
        { id: 'fetch', type: 'activity', run: { command: ['curl', 'x'], image: 'alpine:3' }, retry_policy: { max_attempts: 3 } },
        { id: 'activity_2', type: 'activity', run: { command: ['sh', '-c', 'echo done | wc -c'] } },
        { id: 'wait_for_event', type: 'wait_for_event', event: 'ok', timeout: '5m' },
      ],
      output: '${steps.activity_2.output}',
    });
    expect(input).toEqual({ repo: 'r' });
    const run = new Run(definition);
    run.start(input);
    run.complete('fetch', 'page');
    run.complete('activity_2', '5\n');
    expect(run.decide([{ type: 'event_raised', name: 'ok', data: null }]).commands.at(-1)).toMatchObject({ status: 'completed', output: '5\n' });
  });

  it('a single activity and a wait given by name', () => {
    expect(translateInline('one', { activity: { command: ['true'] }, wait_for_event: 'go' }).definition.steps.map((step) => step.id)).toEqual(['activity_1', 'wait_for_event']);
  });

  it.each([
    [{ activities: 'x' }, 'input.activities: must be an array of activities'],
    [{ activities: [] }, 'input: the inline form needs at least one activity or a wait_for_event'],
    [{ activities: [{ command: [] }, 5] }, 'input.activities[1]: must be a JSON object with a command'],
    [{ activities: [{ command: [], shell: 1 }] }, "input.activities[0]: unknown field 'shell'"],
    [{ activities: [{ command: [] }] }, 'input.activities[0].command: must be a non-empty array of strings'],
    [{ activity: { command: ['x'], retry_policy: { max_attempts: 0 } } }, 'input.activity.retry_policy.max_attempts: must be between 1 and 100'],
    [{ activity: {}, activities: [] }, 'input: give activity or activities, not both'],
    [{ wait_for_event: 5 }, 'input.wait_for_event: must be an event name or {event, timeout?, on_timeout?}'],
    [{ wait_for_event: { event: 'go', timeout: 'soon' } }, 'input.wait_for_event.timeout: must be a duration like 30s, 10m, 2h or 1d'],
  ])('refuses %j naming the client path', (input, message) => {
    expect(() => translateInline('adhoc', input as never)).toThrow(message);
  });
});

describe('definition hash', () => {
  const base = validateDefinition({ name: 'h', description: 'd', steps: [{ id: 'a', type: 'set', value: { x: 1, y: [1, 2] } }] });

  it('ignores key order and the name, and changes with the content', () => {
    const reordered = validateDefinition({ steps: [{ value: { y: [1, 2], x: 1 }, type: 'set', id: 'a' }], description: 'd', name: 'other' });
    expect(definitionHash(reordered)).toBe(definitionHash(base));
    expect(definitionHash(base)).toMatch(/^[0-9a-f]{64}$/);
    for (const changed of [
      { ...base, description: 'e' },
      { ...base, output: 1 },
      { ...base, defaults: { timeout_ms: 5 } },
      { ...base, steps: [{ id: 'a', type: 'set' as const, value: { x: 1, y: [2, 1] } }] },
    ]) {
      expect(definitionHash(changed)).not.toBe(definitionHash(base));
    }
  });
});
