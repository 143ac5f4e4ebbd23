import { describe, expect, it } from 'vitest';
import { decide, LIMITS, replay, type HistoryEvent, type KeptState } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { at, Run } from '../../../../../helpers/orchestration-run.js';
import { META } from '../../../../../helpers/orchestration-sim.js';

const activity = (id: string, extra: object = {}) => ({ id, type: 'activity', run: { command: ['echo', id] }, ...extra });
const def = (steps: object[], extra: object = {}) => ({ name: 'table', steps, ...extra });

describe('decide: activities', () => {
  it('start schedules the first activity with its idempotency key, env and timeout', () => {
    const run = new Run(def([activity('a', { run: { command: ['echo', '${input.who}'], env: ['A=1'] } })], { defaults: { image: 'python:3.12', timeout_ms: 9000 } }));
    const decision = run.start({ who: 'ann' });
    expect(run.types(decision)).toEqual(['OrchestratorStarted', 'ActivityScheduled:a']);
    expect(decision.newEvents[1]).toMatchObject({ sequence: 2, step: 'a', data: { attempt: 1, idempotency_key: 'orch:inst-1:a' }, timestamp: at(0) });
    expect(decision.commands).toEqual([
      {
        type: 'schedule_activity',
        step: 'a',
        attempt: 1,
        kind: 'run',
        idempotency_key: 'orch:inst-1:a',
        timeout_ms: 9000,
        output: 'text',
        body: {
          command: ['echo', 'ann'],
          image: 'python:3.12',
          env: { A: '1', SANDBOXD_ORCHESTRATION_ID: 'inst-1', SANDBOXD_STEP: 'a', SANDBOXD_ATTEMPT: '1', SANDBOXD_IDEMPOTENCY_KEY: 'orch:inst-1:a' },
        },
      },
    ]);
    expect(decision.status).toBe('running');
  });

  it('is pending before it starts, and the same arguments give the same decision', () => {
    const run = new Run(def([activity('a')]));
    expect(decide(run.definition, [], { instance: META, now: at(0) }).status).toBe('pending');
    const first = decide(run.definition, [], { instance: META, now: at(0), inputs: [{ type: 'start', input: 1 }] });
    expect(decide(run.definition, [], { instance: META, now: at(0), inputs: [{ type: 'start', input: 1 }] })).toEqual(first);
  });

  it('started, completed, next step, then completed with the last output', () => {
    const run = new Run(def([activity('a'), activity('b')]));
    run.start();
    expect(run.types(run.decide([{ type: 'activity_started', step: 'a', attempt: 1 }]))).toEqual(['ActivityStarted:a']);
    const afterA = run.complete('a', 'one');
    expect(run.types(afterA)).toEqual(['ActivityCompleted:a', 'ActivityScheduled:b']);
    expect(afterA.newEvents[0]!.data).toEqual({ attempt: 1, output: 'one', exit_code: 0, duration_ms: 5, stderr: '' });
    const end = run.complete('b', 'two');
    expect(run.types(end)).toEqual(['ActivityCompleted:b', 'OrchestratorCompleted']);
    expect(end.commands).toEqual([{ type: 'finish', status: 'completed', output: 'two', error: null, failed_step: null }]);
    expect(end.status).toBe('completed');
  });

  it('output json parses stdout; stdout that is not JSON fails the attempt', () => {
    const run = new Run(def([activity('a', { output: 'json', retry_policy: { max_attempts: 1 } }), activity('b', { run: { command: ['echo', '${steps.a.output.n}'] } })]));
    run.start();
    expect(run.complete('a', '{"n": 7}').commands[0]).toMatchObject({ step: 'b', body: { command: ['echo', '7'] } });
    const bad = new Run(def([activity('a', { output: 'json', retry_policy: { max_attempts: 1 } })]));
    bad.start();
    const failed = bad.complete('a', 'not json');
    expect(failed.newEvents[0]).toMatchObject({ type: 'ActivityFailed', data: { error: expect.stringMatching(/^output is not JSON: /) } });
    expect(failed.commands.at(-1)).toMatchObject({ type: 'finish', status: 'failed', failed_step: 'a' });
    // Output nested 100,000 levels deep (a command's own stdout) fails the attempt naming the bound.
    const deep = new Run(def([activity('a', { output: 'json', retry_policy: { max_attempts: 1 } })]));
    deep.start();
    const tooDeep = deep.complete('a', `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`);
    expect(tooDeep.newEvents[0]).toMatchObject({ type: 'ActivityFailed', data: { error: 'output is nested deeper than 64 levels of arrays and objects' } });
    expect(tooDeep.commands.at(-1)).toMatchObject({ type: 'finish', status: 'failed', failed_step: 'a' });
  });

  it('a non-zero exit code fails the attempt and retries after the back-off, capped', () => {
    const policy = { max_attempts: 4, initial_interval_ms: 1000, backoff_coefficient: 3, max_interval_ms: 5000 };
    const run = new Run(def([activity('a', { retry_policy: policy })]));
    run.start();
    const first = run.decide([{ type: 'activity_completed', step: 'a', attempt: 1, duration_ms: 1, stdout: '', stderr: 'x\nno such file\n', exit_code: 2 }]);
    expect(first.newEvents).toEqual([
      { sequence: 3, type: 'ActivityFailed', step: 'a', data: { attempt: 1, error: 'exit code 2: no such file', exit_code: 2, stderr: 'x\nno such file\n', retry_at: at(2000) }, timestamp: at(1000) },
    ]);
    expect(first.commands).toEqual([{ type: 'create_timer', step: 'a', fire_at: at(2000) }]);
    expect(first.status).toBe('running');
    // A timer reported early is ignored.
    expect(run.decide([{ type: 'timer_fired', step: 'a' }], 500).newEvents).toEqual([]);
    const retry = run.decide([{ type: 'timer_fired', step: 'a' }], 500);
    expect(run.types(retry)).toEqual(['TimerFired:a', 'ActivityScheduled:a']);
    expect(retry.newEvents[1]!.data).toEqual({ attempt: 2, idempotency_key: 'orch:inst-1:a' });
    expect(retry.commands).toMatchObject([{ type: 'schedule_activity', attempt: 2, body: { env: { SANDBOXD_ATTEMPT: '2' } } }]);
    expect(run.fail('a', 'boom', 2).newEvents[0]!.data).toMatchObject({ retry_at: at(2000 + 1000 + 3000) });
    run.decide([{ type: 'timer_fired', step: 'a' }], 3000);
    // 1000 * 3^2 = 9000, capped at 5000.
    expect(run.fail('a', 'boom', 3).newEvents[0]!.data).toMatchObject({ retry_at: at(7000 + 5000) });
    run.decide([{ type: 'timer_fired', step: 'a' }], 5000);
    const last = run.fail('a', 'boom', 4);
    expect(last.newEvents.map((event) => event.type)).toEqual(['ActivityFailed', 'OrchestratorFailed']);
    expect(last.newEvents[0]!.data).not.toHaveProperty('retry_at');
    expect(last.newEvents[1]).toMatchObject({ step: 'a', data: { error: 'boom' } });
  });

  it('an error listed in non_retryable_errors is not retried', () => {
    const run = new Run(def([activity('a', { retry_policy: { max_attempts: 5, non_retryable_errors: ['quota'] } })]));
    run.start();
    const decision = run.fail('a', 'over quota today');
    expect(run.types(decision)).toEqual(['ActivityFailed:a', 'OrchestratorFailed:a']);
    expect(decision.commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: 'over quota today', failed_step: 'a' }]);
  });

  it('on_error continue gives output null and status failed to later steps', () => {
    const run = new Run(def([activity('a', { on_error: 'continue', retry_policy: { max_attempts: 1 } }), { id: 'b', type: 'set', value: { out: '${steps.a.output}', status: '${steps.a.status}' } }]));
    run.start();
    const decision = run.fail('a', 'nope');
    expect(decision.commands).toEqual([{ type: 'finish', status: 'completed', output: { out: null, status: 'failed' }, error: null, failed_step: null }]);
  });

  it('a failed activity that continues still offers its exit code and stderr', () => {
    const run = new Run(def([activity('a', { on_error: 'continue', retry_policy: { max_attempts: 1 } }), { id: 'b', type: 'set', value: ['${steps.a.exit_code}', '${steps.a.stderr}'] }]));
    run.start();
    const decision = run.decide([{ type: 'activity_completed', step: 'a', attempt: 1, duration_ms: 1, stdout: '', stderr: 'bad\n', exit_code: 4 }]);
    expect(decision.commands).toEqual([{ type: 'finish', status: 'completed', output: [4, 'bad\n'], error: null, failed_step: null }]);
  });

  it('an interrupted attempt is retried at once, counting toward max_attempts', () => {
    const run = new Run(def([activity('a', { retry_policy: { max_attempts: 2 } })]));
    run.start();
    run.decide([{ type: 'activity_started', step: 'a', attempt: 1 }]);
    const again = run.decide([{ type: 'activity_interrupted', step: 'a', attempt: 1 }]);
    expect(run.types(again)).toEqual(['ActivityFailed:a', 'ActivityScheduled:a']);
    expect(again.newEvents[0]!.data).toEqual({ attempt: 1, error: 'interrupted by server restart', retry_at: at(2000) });
    expect(again.commands).toMatchObject([{ type: 'schedule_activity', attempt: 2 }]);
    const out = run.decide([{ type: 'activity_interrupted', step: 'a', attempt: 2 }]);
    expect(out.status).toBe('failed');
  });

  it('retry_on_interrupt false fails the step instead of running it again', () => {
    const run = new Run(def([activity('a', { retry_on_interrupt: false })]));
    run.start();
    const decision = run.decide([{ type: 'activity_interrupted', step: 'a', attempt: 1 }]);
    expect(run.types(decision)).toEqual(['ActivityFailed:a', 'OrchestratorFailed:a']);
    expect(decision.commands.at(-1)).toMatchObject({ status: 'failed', error: 'interrupted by server restart' });
  });

  it('stale inputs (another attempt, a result reported twice) change nothing', () => {
    const run = new Run(def([activity('a'), activity('b')]));
    run.start();
    expect(run.complete('a', 'x', 2).newEvents).toEqual([]);
    run.complete('a', 'x');
    expect(run.complete('a', 'again').newEvents).toEqual([]);
    expect(run.decide([{ type: 'activity_started', step: 'zzz', attempt: 1 }]).newEvents).toEqual([]);
  });

  it('a call activity takes the method value as output and keeps one key for every attempt', () => {
    const run = new Run(def([{ id: 'bump', type: 'activity', call: { class: 'counter', object_id: '${input.o}', method: 'inc', args: { by: 1 } } }]));
    const start = run.start({ o: 'builds' });
    expect(start.commands[0]).toMatchObject({ kind: 'call', body: { class: 'counter', object_id: 'builds', method: 'inc', args: { by: 1 } }, idempotency_key: 'orch:inst-1:bump' });
    const done = run.decide([{ type: 'activity_completed', step: 'bump', attempt: 1, duration_ms: 3, value: { count: 4 } }]);
    expect(done.commands.at(-1)).toMatchObject({ status: 'completed', output: { count: 4 } });
  });

  it('an expression leading nowhere fails the step before anything is scheduled', () => {
    const run = new Run(def([activity('a', { run: { command: ['echo', '${input.missing}'] } })]));
    const decision = run.start({});
    expect(run.types(decision)).toEqual(['OrchestratorStarted', 'OrchestratorFailed:a']);
    expect(decision.commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: "run.command[1]: ${input.missing} leads nowhere: input has no field 'missing'", failed_step: 'a' }]);
  });

  it('a body that resolves to something the engine refuses fails the step', () => {
    const run = new Run(def([activity('a', { run: { command: '${input.cmd}' } })]));
    const decision = run.start({ cmd: 'not-an-array' });
    expect(decision.commands.at(-1)).toMatchObject({ status: 'failed', error: 'the resolved body is not valid: run.command: must be a non-empty array of strings' });
    const fine = new Run(def([activity('a', { run: { command: '${input.cmd}' } })]));
    expect(fine.start({ cmd: ['ls', '-l'] }).commands[0]).toMatchObject({ body: { command: ['ls', '-l'] } });
  });

  it('a non-string stdin, command item or env value is passed as its JSON text', () => {
    const run = new Run(def([activity('a', { run: { command: ['cat', '${input.n}', '${input.k}'], stdin: '${input}', env: { N: '${input.n}' } } })]));
    expect(run.start({ k: [1], n: 7 }).commands[0]).toMatchObject({ body: { stdin: '{"k":[1],"n":7}', command: ['cat', '7', '[1]'], env: { N: '7' } } });
  });

  it('an output over 1 MiB is truncated and marked', () => {
    const run = new Run(def([activity('a')]));
    run.start();
    const big = 'é'.repeat(LIMITS.outputBytes);
    const decision = run.complete('a', big);
    const data = decision.newEvents[0]!.data as { output: string; output_truncated?: boolean };
    expect(data.output_truncated).toBe(true);
    expect(Buffer.byteLength(data.output)).toBeLessThanOrEqual(LIMITS.outputBytes);
    expect(decision.newEvents[1]).toMatchObject({ type: 'OrchestratorCompleted', data: { output_truncated: true } });
  });

  it('stamps new events no earlier than the last history timestamp', () => {
    const run = new Run(def([activity('a')]));
    run.start();
    const decision = run.decide([{ type: 'activity_started', step: 'a', attempt: 1 }], -5000);
    expect(decision.newEvents[0]!.timestamp).toBe(at(0));
  });
});

describe('decide: when', () => {
  it('a false condition skips the step (output null, status skipped) and records StepSkipped', () => {
    const run = new Run(def([activity('a', { when: { path: 'input.go', op: 'eq', value: true } }), { id: 'b', type: 'set', value: ['${steps.a.output}', '${steps.a.status}'] }]));
    const decision = run.start({ go: false });
    expect(run.types(decision)).toEqual(['OrchestratorStarted', 'StepSkipped:a', 'OrchestratorCompleted']);
    expect(decision.commands.at(-1)).toMatchObject({ output: [null, 'skipped'] });
  });

  it('combinations and every operator', () => {
    const cases: [object, boolean][] = [
      [{ path: 'input.n', op: 'gt', value: 2 }, true],
      [{ path: 'input.n', op: 'lte', value: 2 }, false],
      [{ all: [{ path: 'input.n', op: 'gte', value: 3 }, { path: 'input.s', op: 'lt', value: 'b' }] }, true],
      [{ any: [{ path: 'input.missing', op: 'exists' }, { not: { path: 'input.s', op: 'in', value: ['x', 'y'] } }] }, true],
      [{ path: 'input.missing', op: 'ne', value: 1 }, true],
      [{ path: 'input.zero', op: 'truthy' }, false],
    ];
    for (const [when, runs] of cases) {
      const run = new Run(def([activity('a', { when })]));
      expect(run.start({ n: 3, s: 'a', zero: 0 }).status, JSON.stringify(when)).toBe(runs ? 'running' : 'completed');
    }
  });
});

describe('decide: timers', () => {
  it('a duration counts from the TimerCreated timestamp; the timer fires into the next step', () => {
    const run = new Run(def([activity('a'), { id: 't', type: 'timer', duration: '30s' }, activity('b')]));
    run.start();
    const decision = run.complete('a', '');
    expect(decision.newEvents[1]).toMatchObject({ type: 'TimerCreated', step: 't', data: { fire_at: at(31_000) }, timestamp: at(1000) });
    expect(decision.commands).toEqual([{ type: 'create_timer', step: 't', fire_at: at(31_000) }]);
    expect(decision.status).toBe('running');
    expect(run.decide([{ type: 'timer_fired', step: 't' }], 10_000).newEvents).toEqual([]);
    expect(run.types(run.decide([{ type: 'timer_fired', step: 't' }], 20_000))).toEqual(['TimerFired:t', 'ActivityScheduled:b']);
  });

  it('until takes an RFC 3339 time or an expression; a bad resolved value fails the step', () => {
    const literal = new Run(def([{ id: 't', type: 'timer', until: '2026-03-01T10:00:00+01:00' }]));
    expect(literal.start().commands).toEqual([{ type: 'create_timer', step: 't', fire_at: '2026-03-01T09:00:00.000Z' }]);
    const expression = new Run(def([{ id: 't', type: 'timer', until: '${input.when}' }]));
    expect(expression.start({ when: '2026-02-01T00:00:00Z' }).commands[0]).toMatchObject({ fire_at: '2026-02-01T00:00:00.000Z' });
    const bad = new Run(def([{ id: 't', type: 'timer', until: '${input.when}' }]));
    expect(bad.start({ when: 'tomorrow' }).commands[0]).toMatchObject({ status: 'failed', error: 'until: "tomorrow" is not an RFC 3339 timestamp' });
  });
});

describe('decide: wait_for_event', () => {
  const waits = (extra: object = {}) => def([{ id: 'w', type: 'wait_for_event', event: 'approved', ...extra }, { id: 'after', type: 'set', value: '${steps.w.output}' }]);

  it('waits (status waiting), then a matching event is consumed and its data is the output', () => {
    const run = new Run(waits());
    expect(run.start().status).toBe('waiting');
    expect(run.decide([{ type: 'event_raised', name: 'other', data: 1 }]).status).toBe('waiting');
    const decision = run.decide([{ type: 'event_raised', name: 'approved', data: { ok: true } }]);
    expect(run.types(decision)).toEqual(['EventRaised', 'EventConsumed:w', 'OrchestratorCompleted']);
    expect(decision.newEvents[1]!.data).toEqual({ name: 'approved', raised_sequence: 3 });
    expect(decision.commands).toEqual([{ type: 'finish', status: 'completed', output: { ok: true }, error: null, failed_step: null }]);
  });

  it('an event raised before the wait is buffered; several waits consume in raise order', () => {
    const run = new Run(def([activity('a'), { id: 'w1', type: 'wait_for_event', event: 'go' }, { id: 'w2', type: 'wait_for_event', event: 'go' }, { id: 'out', type: 'set', value: ['${steps.w1.output}', '${steps.w2.output}'] }]));
    run.start();
    run.decide([{ type: 'event_raised', name: 'go', data: 'first' }]);
    run.decide([{ type: 'event_raised', name: 'go', data: 'second' }]);
    const decision = run.complete('a', '');
    expect(run.types(decision)).toEqual(['ActivityCompleted:a', 'EventConsumed:w1', 'EventConsumed:w2', 'OrchestratorCompleted']);
    expect(decision.commands.at(-1)).toMatchObject({ output: ['first', 'second'] });
  });

  it('a timeout with on_timeout fail fails the instance; continue gives null; consuming cancels the deadline', () => {
    const failing = new Run(waits({ timeout: '1h' }));
    const start = failing.start();
    expect(start.commands).toEqual([{ type: 'create_timer', step: 'w', fire_at: at(3_600_000) }]);
    expect(start.status).toBe('waiting');
    const timedOut = failing.decide([{ type: 'timer_fired', step: 'w' }], 3_600_000);
    expect(timedOut.commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: "timed out after 1h waiting for event 'approved'", failed_step: 'w' }]);
    const continuing = new Run(waits({ timeout: '1h', on_timeout: 'continue' }));
    continuing.start();
    expect(continuing.decide([{ type: 'timer_fired', step: 'w' }], 3_600_000).commands.at(-1)).toMatchObject({ status: 'completed', output: null });
    const consumed = new Run(waits({ timeout: '1h' }));
    consumed.start();
    expect(consumed.decide([{ type: 'event_raised', name: 'approved', data: 1 }]).commands).toEqual([
      { type: 'cancel_timer', step: 'w' },
      { type: 'finish', status: 'completed', output: 1, error: null, failed_step: null },
    ]);
  });
});

describe('decide: terminate and limits', () => {
  it('terminate cancels running activities and timers and finishes terminated; later inputs change nothing', () => {
    const run = new Run(def([{ id: 'p', type: 'parallel', branches: { x: [activity('a')], y: [{ id: 't', type: 'timer', duration: '1h' }] } }]));
    run.start();
    const decision = run.decide([{ type: 'terminate', reason: 'enough' }]);
    expect(run.types(decision)).toEqual(['OrchestratorTerminated']);
    expect(decision.commands).toEqual([
      { type: 'cancel_activity', step: 'p.x.a', attempt: 1 },
      { type: 'cancel_timer', step: 'p.y.t' },
      { type: 'finish', status: 'terminated', output: null, error: 'enough', failed_step: null },
    ]);
    expect(decision.status).toBe('terminated');
    const later = run.complete('p.x.a', 'late');
    expect(later).toEqual({ newEvents: [], commands: [], status: 'terminated', open: [] });
  });

  it('a pending instance can be terminated', () => {
    const run = new Run(def([activity('a')]));
    expect(run.decide([{ type: 'terminate', reason: 'no' }]).status).toBe('terminated');
  });

  it(`fails with 'history limit reached' instead of passing ${LIMITS.historyEvents} events`, () => {
    const run = new Run(def([{ id: 'w', type: 'wait_for_event', event: 'never' }]));
    run.start();
    const history: HistoryEvent[] = [...run.history];
    while (history.length < LIMITS.historyEvents - 1) {
      history.push({ sequence: history.length + 1, type: 'EventRaised', step: null, data: { name: 'noise', data: null }, timestamp: at(1) });
    }
    const decision = decide(run.definition, history, { instance: META, now: at(2), inputs: [{ type: 'event_raised', name: 'noise', data: null }] });
    expect(decision.newEvents).toEqual([{ sequence: LIMITS.historyEvents, type: 'OrchestratorFailed', step: null, data: { error: 'history limit reached' }, timestamp: at(2) }]);
    expect(decision.commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: 'history limit reached', failed_step: null }]);
    // From a kept state the same, and the state is left as the returned events make it, not as
    // the first attempt (which recorded the event) did.
    const kept: KeptState = { state: replay(history), history: () => history };
    expect(decide(run.definition, kept, { instance: META, now: at(2), inputs: [{ type: 'event_raised', name: 'noise', data: null }] })).toEqual(decision);
    expect(kept.state).toEqual(replay([...history, ...decision.newEvents]));
  });
});

describe('decide: a first decision past the history limit', () => {
  it('keeps the start and fails at once', () => {
    const run = new Run(def([{ id: 'm', type: 'map', items: '${input}', max_concurrency: 32, step: { type: 'parallel', branches: Object.fromEntries(Array.from({ length: 400 }, (_, index) => [`b${index}`, [activity('x')]])) } }]));
    const decision = run.start(Array.from({ length: 32 }, (_, index) => index));
    expect(run.types(decision)).toEqual(['OrchestratorStarted', 'OrchestratorFailed']);
    expect(decision.commands).toEqual([{ type: 'finish', status: 'failed', output: null, error: 'history limit reached', failed_step: null }]);
  });
});
