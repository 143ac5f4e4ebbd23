import { describe, expect, it } from 'vitest';
import type { Command } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { Run } from '../../../../../helpers/orchestration-run.js';

const activity = (id: string, extra: object = {}) => ({ id, type: 'activity', run: { command: ['echo', id] }, retry_policy: { max_attempts: 1 }, ...extra });
const def = (steps: object[], extra: object = {}) => ({ name: 'table', steps, ...extra });
const scheduled = (commands: Command[]) => commands.flatMap((command) => (command.type === 'schedule_activity' ? [command.step] : []));

describe('decide: parallel', () => {
  const parallel = (extra: object = {}) =>
    def([
      activity('first'),
      { id: 'checks', type: 'parallel', branches: { lint: [activity('lint')], test: [activity('unit'), activity('e2e', { run: { command: ['echo', '${steps.unit.output}', '${steps.first.output}'] } })] }, ...extra },
      { id: 'out', type: 'set', value: '${steps.checks.output}' },
    ]);

  it('runs the branches at once under branch paths and outputs {branch: last output}', () => {
    const run = new Run(parallel());
    run.start();
    const fanOut = run.complete('first', 'F');
    expect(scheduled(fanOut.commands)).toEqual(['checks.lint.lint', 'checks.test.unit']);
    expect(fanOut.commands[0]).toMatchObject({ idempotency_key: 'orch:inst-1:checks.lint.lint', body: { env: { SANDBOXD_STEP: 'checks.lint.lint' } } });
    expect(scheduled(run.complete('checks.test.unit', 'U').commands)).toEqual(['checks.test.e2e']);
    expect(run.history.at(-1)!.step).toBe('checks.test.e2e');
    expect(run.complete('checks.test.e2e', 'E').commands).toEqual([]);
    const done = run.complete('checks.lint.lint', 'L');
    expect(done.commands).toEqual([{ type: 'finish', status: 'completed', output: { lint: 'L', test: 'E' }, error: null, failed_step: null }]);
  });

  it('a branch step sees its own earlier steps and the steps before the parallel', () => {
    const run = new Run(parallel());
    run.start();
    run.complete('first', 'F');
    expect(run.complete('checks.test.unit', 'U').commands[0]).toMatchObject({ body: { command: ['echo', 'U', 'F'] } });
  });

  it('fail_fast (the default): the first failure cancels the other branches and fails the instance', () => {
    const run = new Run(parallel());
    run.start();
    run.complete('first', 'F');
    const decision = run.fail('checks.test.unit', 'red');
    expect(decision.commands).toEqual([
      { type: 'cancel_activity', step: 'checks.lint.lint', attempt: 1 },
      { type: 'finish', status: 'failed', output: null, error: 'red', failed_step: 'checks.test.unit' },
    ]);
  });

  it('fail_fast false waits for every branch, then fails with the first failure', () => {
    const run = new Run(parallel({ fail_fast: false }));
    run.start();
    run.complete('first', 'F');
    const afterFailure = run.fail('checks.test.unit', 'red');
    expect(afterFailure.commands).toEqual([]);
    expect(afterFailure.status).toBe('running');
    expect(run.complete('checks.lint.lint', 'L').commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: 'red', failed_step: 'checks.test.unit' }]);
  });

  it('on_error continue on the parallel gives it output null and goes on', () => {
    const run = new Run(parallel({ on_error: 'continue' }));
    run.start();
    run.complete('first', 'F');
    expect(run.fail('checks.lint.lint', 'red').commands).toEqual([
      { type: 'cancel_activity', step: 'checks.test.unit', attempt: 1 },
      { type: 'finish', status: 'completed', output: null, error: null, failed_step: null },
    ]);
  });
});

describe('decide: map', () => {
  const map = (extra: object = {}, step: object = activity('each_item', { run: { command: ['echo', '${item.name}', '${index}'] } })) =>
    def([{ id: 'list', type: 'set', value: '${input.items}' }, { id: 'each', type: 'map', items: '${steps.list.output}', step, ...extra }]);
  const items = (count: number) => Array.from({ length: count }, (_, index) => ({ name: `n${index}` }));

  it('runs at most max_concurrency items at once, starting them in order, with item and index', () => {
    const run = new Run(map({ max_concurrency: 2 }));
    const start = run.start({ items: items(5) });
    expect(scheduled(start.commands)).toEqual(['each[0]', 'each[1]']);
    expect(start.commands[1]).toMatchObject({ body: { command: ['echo', 'n1', '1'] }, idempotency_key: 'orch:inst-1:each[1]' });
    expect(scheduled(run.complete('each[1]', 'b').commands)).toEqual(['each[2]']);
    expect(scheduled(run.complete('each[0]', 'a').commands)).toEqual(['each[3]']);
  });

  it('defaults to 4 at once and outputs in item order whatever the completion order', () => {
    const run = new Run(map());
    expect(scheduled(run.start({ items: items(6) }).commands)).toEqual(['each[0]', 'each[1]', 'each[2]', 'each[3]']);
    for (const index of [3, 1, 5, 4, 0]) run.complete(`each[${index}]`, `out${index}`);
    const done = run.complete('each[2]', 'out2');
    expect(done.commands.at(-1)).toEqual({ type: 'finish', status: 'completed', output: ['out0', 'out1', 'out2', 'out3', 'out4', 'out5'], error: null, failed_step: null });
  });

  it('an empty list completes at once with []', () => {
    const run = new Run(map());
    expect(run.start({ items: [] }).commands).toEqual([{ type: 'finish', status: 'completed', output: [], error: null, failed_step: null }]);
  });

  it('a failed item fails the map and cancels the running items; on_error continue on the item gives null', () => {
    const run = new Run(map({ max_concurrency: 3 }));
    run.start({ items: items(3) });
    expect(run.fail('each[1]', 'bad item').commands).toEqual([
      { type: 'cancel_activity', step: 'each[0]', attempt: 1 },
      { type: 'cancel_activity', step: 'each[2]', attempt: 1 },
      { type: 'finish', status: 'failed', output: null, error: 'bad item', failed_step: 'each[1]' },
    ]);
    const tolerant = new Run(map({}, activity('x', { on_error: 'continue' })));
    tolerant.start({ items: items(2) });
    tolerant.fail('each[0]', 'bad');
    expect(tolerant.complete('each[1]', 'ok').commands.at(-1)).toMatchObject({ status: 'completed', output: [null, 'ok'] });
  });

  it('items that are not an array, or more than 1000, fail the map', () => {
    const notArray = new Run(map());
    expect(notArray.start({ items: { a: 1 } }).commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: 'items: must resolve to an array, got object', failed_step: 'each' }]);
    const tooMany = new Run(map());
    expect(tooMany.start({ items: items(1001) }).commands[0]).toMatchObject({ status: 'failed', error: 'items: 1001 items, at most 1000' });
  });

  it('a map of parallels nests paths (each[0].b.x)', () => {
    const run = new Run(map({ max_concurrency: 1 }, { type: 'parallel', branches: { b: [activity('x')], c: [{ id: 'y', type: 'set', value: '${item.name}' }] } }));
    expect(scheduled(run.start({ items: items(2) }).commands)).toEqual(['each[0].b.x']);
    expect(scheduled(run.complete('each[0].b.x', 'X0').commands)).toEqual(['each[1].b.x']);
    expect(run.complete('each[1].b.x', 'X1').commands.at(-1)).toMatchObject({ output: [{ b: 'X0', c: 'n0' }, { b: 'X1', c: 'n1' }] });
  });
});

describe('decide: set and the instance output', () => {
  it('set shapes data with expressions at any depth; interpolation writes non-strings as JSON', () => {
    const run = new Run(def([{ id: 's', type: 'set', value: { list: ['${input.a}', { deep: 'a=${input.a} b=${input.b}' }], who: '${orchestration.name}/${orchestration.id}' } }]));
    expect(run.start({ a: [1, 2], b: 'x' }).commands).toEqual([
      { type: 'finish', status: 'completed', output: { list: [[1, 2], { deep: 'a=[1,2] b=x' }], who: 'sim/inst-1' }, error: null, failed_step: null },
    ]);
  });

  it("the definition's output replaces the last step's; a path into nowhere fails the instance", () => {
    const run = new Run(def([{ id: 'a', type: 'set', value: 1 }, { id: 'b', type: 'set', value: 2 }], { output: { first: '${steps.a.output}' } }));
    expect(run.start().commands[0]).toMatchObject({ status: 'completed', output: { first: 1 } });
    const broken = new Run(def([{ id: 'a', type: 'set', value: { x: 1 } }], { output: '${steps.a.output.y}' }));
    expect(broken.start().commands[0]).toEqual({ type: 'finish', status: 'failed', output: null, error: "output: ${steps.a.output.y} leads nowhere: steps.a.output has no field 'y'", failed_step: null });
  });
});

describe('decide: several inputs at once and waits in branches', () => {
  it('records a batch of inputs in order (a restart reporting every interrupted attempt)', () => {
    const run = new Run(def([{ id: 'p', type: 'parallel', branches: { x: [activity('a', { retry_policy: { max_attempts: 2 } })], y: [activity('b', { retry_policy: { max_attempts: 2 } })] } }]));
    run.start();
    run.decide([
      { type: 'activity_started', step: 'p.x.a', attempt: 1 },
      { type: 'activity_started', step: 'p.y.b', attempt: 1 },
    ]);
    const decision = run.decide([
      { type: 'activity_interrupted', step: 'p.x.a', attempt: 1 },
      { type: 'activity_interrupted', step: 'p.y.b', attempt: 1 },
    ]);
    expect(run.types(decision)).toEqual(['ActivityFailed:p.x.a', 'ActivityScheduled:p.x.a', 'ActivityFailed:p.y.b', 'ActivityScheduled:p.y.b']);
    expect(decision.commands.map((command) => command.type === 'schedule_activity' && [command.step, command.attempt])).toEqual([
      ['p.x.a', 2],
      ['p.y.b', 2],
    ]);
  });

  it('waits for one event name in two branches take the buffered events in definition order', () => {
    const run = new Run(def([{ id: 'p', type: 'parallel', branches: { one: [{ id: 'w', type: 'wait_for_event', event: 'go' }], two: [{ id: 'w', type: 'wait_for_event', event: 'go' }] } }]));
    expect(run.start().status).toBe('waiting');
    expect(run.types(run.decide([{ type: 'event_raised', name: 'go', data: 1 }]))).toEqual(['EventRaised', 'EventConsumed:p.one.w']);
    const done = run.decide([{ type: 'event_raised', name: 'go', data: 2 }]);
    expect(done.commands).toEqual([{ type: 'finish', status: 'completed', output: { one: 1, two: 2 }, error: null, failed_step: null }]);
  });
});
