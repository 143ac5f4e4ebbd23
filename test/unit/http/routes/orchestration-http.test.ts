import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ExecRequest } from '../../../../src/backends/backend.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

/**
 * The orchestration routes and service over the fake backend: activities run as fake execs
 * (scripted per command), time moves by a manual clock and the timers driver is ticked by hand.
 */
let h: FakeHarness;
let time: ReturnType<typeof manualClock>;
/** The commands the fake backend ran, in order. */
let ran: string[];

beforeEach(async () => {
  time = manualClock();
  h = await fakeHarness({}, time.clock);
  ran = [];
  // echo and printf, as far as these tests use them.
  script(({ command }) => ({ chunks: [{ stream: 'stdout', text: command.slice(1).join(' ') + (command[0] === 'echo' ? '\n' : '') }] }));
});
afterEach(() => h.close());

function script(answer: (request: ExecRequest) => { chunks?: { stream: 'stdout' | 'stderr'; text: string }[]; exit_code?: number; hang?: boolean }) {
  h.backend.onExec = (request) => {
    ran.push(request.command.join(' '));
    return answer(request);
  };
}

const api = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) => {
  const response = await h.app.inject({ method, url, ...(payload !== undefined && { payload: payload as object }) });
  if (process.env.DEBUG_ORCH) console.log(method, url, response.statusCode, response.body.slice(0, 600));
  return { status: response.statusCode, body: response.json() as { success: boolean; data: any; error: string; code: string } };
};

/** Waits (without a clock) until the instance's status is one of `statuses`. */
async function until(id: string, ...statuses: string[]): Promise<any> {
  for (let round = 0; round < 2000; round++) {
    const { body } = await api('GET', `/orchestrations/${id}`);
    if (statuses.includes(body.data.status)) return body.data;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`orchestration ${id} never reached ${statuses.join('/')}`);
}

async function untilStep(id: string, step: string, status: string): Promise<void> {
  for (let round = 0; round < 2000; round++) {
    const { body } = await api('GET', `/orchestrations/${id}`);
    if (body.data.steps.some((entry: { id: string; status: string }) => entry.id === step && entry.status === status)) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`step ${step} of ${id} never reached ${status}`);
}

const TWO_STEPS = {
  name: 'two',
  steps: [
    { id: 'first', type: 'activity', run: { command: ['echo', '${input.word}'] } },
    { id: 'second', type: 'activity', output: 'json', run: { command: ['printf', '{"n": 2}'] } },
  ],
  output: { word: '${steps.first.output}', n: '${steps.second.output.n}' },
};

describe('definitions', () => {
  it('creates (201), keeps the version for the same content (200), bumps it for new content, lists by name, deletes', async () => {
    const created = await api('POST', '/orchestrations/definitions', TWO_STEPS);
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: 'two', version: 1, description: null, output: TWO_STEPS.output });
    expect((await api('POST', '/orchestrations/definitions', TWO_STEPS)).body.data.version).toBe(1);
    const changed = await api('POST', '/orchestrations/definitions', { ...TWO_STEPS, description: 'now described' });
    expect([changed.status, changed.body.data.version, changed.body.data.description]).toEqual([200, 2, 'now described']);
    await api('POST', '/orchestrations/definitions', { name: 'alpha', steps: [{ id: 'x', type: 'set', value: 1 }] });
    expect((await api('GET', '/orchestrations/definitions')).body.data.map((d: { name: string }) => d.name)).toEqual(['alpha', 'two']);
    expect((await api('GET', '/orchestrations/definitions/two')).body.data.version).toBe(2);
    expect((await api('DELETE', '/orchestrations/definitions/two')).body.data).toBe("orchestration definition 'two' deleted");
    expect((await api('GET', '/orchestrations/definitions/two')).status).toBe(404);
    expect((await api('DELETE', '/orchestrations/definitions/two')).status).toBe(404);
  });

  it.each([
    ['an unknown step type', { name: 'bad', steps: [{ id: 'a', type: 'loop' }] }, /steps\[0\]\.type: unknown step type 'loop'/],
    ['duplicate ids', { name: 'bad', steps: [{ id: 'a', type: 'set', value: 1 }, { id: 'a', type: 'set', value: 2 }] }, /steps\[1\]\.id: duplicate id 'a'/],
    [
      'a reference to a later step',
      { name: 'bad', steps: [{ id: 'a', type: 'set', value: '${steps.b.output}' }, { id: 'b', type: 'set', value: 1 }] },
      /steps\[0\]\.value.*'b'/,
    ],
    ['a bad duration', { name: 'bad', steps: [{ id: 't', type: 'timer', duration: '10 minutes' }] }, /steps\[0\]\.duration/],
    [
      'max_attempts out of range',
      { name: 'bad', steps: [{ id: 'a', type: 'activity', run: { command: ['true'] }, retry_policy: { max_attempts: 101 } }] },
      /steps\[0\]\.retry_policy\.max_attempts/,
    ],
    ['no name', { steps: [{ id: 'a', type: 'set', value: 1 }] }, /name/],
    ['not an object', [1, 2], /must be a JSON object/],
  ])('400 for %s, naming the path', async (_what, body, pattern) => {
    const { status, body: answer } = await api('POST', '/orchestrations/definitions', body);
    expect(status).toBe(400);
    expect(answer.error).toMatch(pattern);
  });
});

describe('instances', () => {
  it('runs a definition to completion: outputs, history, steps, the list', async () => {
    await api('POST', '/orchestrations/definitions', TWO_STEPS);
    const started = await api('POST', '/orchestrations', { name: 'two', input: { word: 'hello' } });
    expect(started.status).toBe(202);
    expect(started.body.data).toMatchObject({ name: 'two', definition_version: 1, status: 'running', input: { word: 'hello' } });
    const done = await until(started.body.data.id, 'completed');
    expect(done.output).toEqual({ word: 'hello\n', n: 2 });
    expect(done.steps.map((step: { id: string; status: string }) => `${step.id}:${step.status}`)).toEqual(['first:completed', 'second:completed']);
    expect(done.history.map((event: { type: string }) => event.type)).toEqual([
      'OrchestratorStarted',
      'ActivityScheduled',
      'ActivityStarted',
      'ActivityCompleted',
      'ActivityScheduled',
      'ActivityStarted',
      'ActivityCompleted',
      'OrchestratorCompleted',
    ]);
    expect(ran).toEqual(['echo hello', 'printf {"n": 2}']);
    const list = await api('GET', '/orchestrations?status=completed&name=two');
    expect(list.body.data.map((entry: { id: string; history?: unknown }) => [entry.id, entry.history])).toEqual([[done.id, undefined]]);
    expect((await api('GET', `/orchestrations/${done.id}?history=false`)).body.data.history).toBeUndefined();
    const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/sandboxd_orchestrations_total\{status="completed"\} 1/);
    expect(metrics.body).toMatch(/sandboxd_activity_duration_seconds_count\{type="run",outcome="completed"\} 2/);
  });

  it('starts idempotently by id: the same id and name answer 200 with the instance, another name 409', async () => {
    await api('POST', '/orchestrations/definitions', TWO_STEPS);
    await api('POST', '/orchestrations/definitions', { name: 'other', steps: [{ id: 'x', type: 'set', value: 1 }] });
    const first = await api('POST', '/orchestrations', { name: 'two', id: 'build-42', input: { word: 'a' } });
    expect([first.status, first.body.data.id]).toEqual([202, 'build-42']);
    const again = await api('POST', '/orchestrations', { name: 'two', id: 'build-42', input: { word: 'b' } });
    expect([again.status, again.body.data.input]).toEqual([200, { word: 'a' }]);
    const other = await api('POST', '/orchestrations', { name: 'other', id: 'build-42' });
    expect([other.status, other.body.code]).toEqual([409, 'CONFLICT']);
    await until('build-42', 'completed');
    expect(ran.filter((command) => command.startsWith('echo'))).toEqual(['echo a']);
    // A repeat answers the instance even after its definition went.
    await api('DELETE', '/orchestrations/definitions/two');
    expect((await api('POST', '/orchestrations', { name: 'two', id: 'build-42' })).status).toBe(200);
  });

  it.each([
    ['an unknown definition', { name: 'nothing' }, 404, /^orchestration definition 'nothing' not found$/],
    ['a bad id', { name: 'two', id: '-x' }, 400, /^body\/id|id: must match/],
    ['a bad start_at', { name: 'two', start_at: 'tomorrow' }, 400, /start_at: must be an RFC 3339 timestamp/],
    ['an unknown field', { name: 'two', priority: 1 }, 400, /priority/],
    ['an invalid inline definition', { name: 'inline', definition: { steps: [{ id: 'A', type: 'set', value: 1 }] } }, 400, /steps\[0\]\.id/],
  ])('refuses %s', async (_what, body, status, pattern) => {
    await api('POST', '/orchestrations/definitions', TWO_STEPS);
    const answer = await api('POST', '/orchestrations', body);
    expect(answer.status).toBe(status);
    expect(answer.body.error).toMatch(pattern);
  });

  it('refuses an input over 1 MiB with 413', async () => {
    await api('POST', '/orchestrations/definitions', TWO_STEPS);
    const answer = await api('POST', '/orchestrations', { name: 'two', input: { blob: 'x'.repeat(1024 * 1024) } });
    expect([answer.status, answer.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    expect(answer.body.error).toMatch(/^input: \d+ bytes of JSON; at most 1048576/);
    expect((await api('GET', '/orchestrations')).body.data).toEqual([]);
  });

  it('fails the step when an activity promised JSON and printed something else', async () => {
    await api('POST', '/orchestrations/definitions', {
      name: 'jsonish',
      steps: [{ id: 'list', type: 'activity', output: 'json', run: { command: ['echo', 'not json'] }, retry_policy: { max_attempts: 1 } }],
    });
    const { body } = await api('POST', '/orchestrations', { name: 'jsonish' });
    const failed = await until(body.data.id, 'failed');
    expect(failed.failed_step).toBe('list');
    expect(failed.error).toMatch(/output is not JSON/);
  });

  it('runs an inline definition and the agentkernel inline form (definition_version 0)', async () => {
    const inline = await api('POST', '/orchestrations', { name: 'once', definition: { steps: [{ id: 'a', type: 'activity', run: { command: ['echo', 'x'] } }] } });
    expect((await until(inline.body.data.id, 'completed')).definition_version).toBe(0);
    const agentkernel = await api('POST', '/orchestrations', { name: 'legacy', input: { activities: [{ command: ['echo', 'legacy'] }] } });
    expect(agentkernel.status).toBe(202);
    const done = await until(agentkernel.body.data.id, 'completed');
    expect(done.output).toBe('legacy\n');
    expect((await api('GET', '/orchestrations/definitions')).body.data).toEqual([]);
  });

  it('retries a failed attempt after its back-off, driven by the timers', async () => {
    let calls = 0;
    script(() => (++calls === 1 ? { chunks: [{ stream: 'stderr', text: 'flaky\n' }], exit_code: 1 } : { chunks: [{ stream: 'stdout', text: 'ok' }] }));
    await api('POST', '/orchestrations/definitions', {
      name: 'flaky',
      steps: [{ id: 'a', type: 'activity', run: { command: ['flaky'] }, retry_policy: { max_attempts: 2, initial_interval_ms: 5000 } }],
    });
    const { body } = await api('POST', '/orchestrations', { name: 'flaky' });
    await untilStep(body.data.id, 'a', 'retrying');
    await h.services.timers.tick();
    expect(calls).toBe(1);
    time.advance(5);
    await h.services.timers.tick();
    const done = await until(body.data.id, 'completed');
    expect(done.output).toBe('ok');
    expect(done.steps[0].attempts).toBe(2);
  });
});

describe('events, terminate, delete', () => {
  const WAITS = {
    name: 'approve',
    steps: [
      { id: 'cool', type: 'timer', duration: '10s' },
      { id: 'approval', type: 'wait_for_event', event: 'approved' },
    ],
  };

  it('buffers an event raised before its wait and consumes it when the wait starts', async () => {
    await api('POST', '/orchestrations/definitions', WAITS);
    const { body } = await api('POST', '/orchestrations', { name: 'approve' });
    const raised = await api('POST', `/orchestrations/${body.data.id}/events`, { name: 'approved', data: { ok: true } });
    expect(raised.status).toBe(202);
    expect(raised.body.data).toEqual({ accepted: true, id: body.data.id, event: 'approved', sequence: expect.any(Number) });
    expect((await api('GET', `/orchestrations/${body.data.id}`)).body.data.status).toBe('running');
    time.advance(10);
    await h.services.timers.tick();
    const done = await until(body.data.id, 'completed');
    expect(done.output).toEqual({ ok: true });
    const consumed = done.history.find((event: { type: string }) => event.type === 'EventConsumed');
    expect(consumed.data.raised_sequence).toBe(raised.body.data.sequence);
  });

  it('answers 409 to events and terminate on a finished instance, and deletes only finished ones', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    const { body } = await api('POST', '/orchestrations', { name: 'wait' });
    expect(body.data.status).toBe('waiting');
    expect(body.data.waiting_for).toEqual(['go']);
    const early = await api('DELETE', `/orchestrations/${body.data.id}`);
    expect([early.status, early.body.error]).toEqual([409, `orchestration '${body.data.id}' is waiting; terminate it first, only finished instances are deleted`]);
    expect((await api('POST', `/orchestrations/${body.data.id}/events`, { name: 'go', data: 1 })).status).toBe(202);
    await until(body.data.id, 'completed');
    const late = await api('POST', `/orchestrations/${body.data.id}/events`, { name: 'go' });
    expect([late.status, late.body.error]).toEqual([409, `orchestration '${body.data.id}' is completed; it takes no more events`]);
    expect((await api('POST', `/orchestrations/${body.data.id}/terminate`, {})).status).toBe(409);
    expect((await api('DELETE', `/orchestrations/${body.data.id}`)).body.data).toEqual({ deleted: true, id: body.data.id });
    expect((await api('GET', `/orchestrations/${body.data.id}`)).status).toBe(404);
    expect((await api('POST', `/orchestrations/${body.data.id}/events`, { name: 'go' })).status).toBe(404);
  });

  it.each([
    ['a bad event name', { name: '-bad' }, /name: must match/],
    ['no name', { data: 1 }, /name/],
    ['an unknown field', { name: 'go', extra: 1 }, /extra/],
  ])('refuses an event with %s (400)', async (_what, payload, pattern) => {
    await api('POST', '/orchestrations/definitions', { name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    const { body } = await api('POST', '/orchestrations', { name: 'wait' });
    const answer = await api('POST', `/orchestrations/${body.data.id}/events`, payload);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(pattern);
  });

  it('refuses event data over 1 MiB with 413', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    const { body } = await api('POST', '/orchestrations', { name: 'wait' });
    const answer = await api('POST', `/orchestrations/${body.data.id}/events`, { name: 'go', data: 'x'.repeat(1024 * 1024) });
    expect(answer.status).toBe(413);
  });

  it('terminate aborts a running activity and records the reason', async () => {
    script(() => ({ hang: true }));
    await api('POST', '/orchestrations/definitions', { name: 'slow', steps: [{ id: 'long', type: 'activity', run: { command: ['sleep', '600'] } }] });
    const { body } = await api('POST', '/orchestrations', { name: 'slow' });
    await untilStep(body.data.id, 'long', 'running');
    expect(h.services.orchestrations.inflight).toBe(1);
    const terminated = await api('POST', `/orchestrations/${body.data.id}/terminate`, { reason: 'no longer needed' });
    expect(terminated.status).toBe(200);
    expect(terminated.body.data).toMatchObject({ status: 'terminated', error: 'no longer needed' });
    // The fake's hanging exec returns only when aborted (its own timeout is 300 s away).
    for (let round = 0; round < 1000 && h.services.orchestrations.inflight > 0; round++) await new Promise((resolve) => setTimeout(resolve, 2));
    expect(h.services.orchestrations.inflight).toBe(0);
    expect((await api('GET', `/orchestrations/${body.data.id}`)).body.data.status).toBe('terminated');
  });

  it('terminates with the default reason when no body is sent', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    const { body } = await api('POST', '/orchestrations', { name: 'wait' });
    const answer = await h.app.inject({ method: 'POST', url: `/orchestrations/${body.data.id}/terminate` });
    expect(answer.json().data).toMatchObject({ status: 'terminated', error: 'terminated by request' });
  });
});

describe('start_at, retention, list paging, schedules', () => {
  it('keeps an instance pending until start_at, then starts it', async () => {
    await api('POST', '/orchestrations/definitions', TWO_STEPS);
    const startAt = new Date(time.clock().getTime() + 60_000).toISOString();
    const { status, body } = await api('POST', '/orchestrations', { name: 'two', input: { word: 'later' }, start_at: startAt });
    expect([status, body.data.status, body.data.start_at]).toEqual([202, 'pending', startAt]);
    await h.services.timers.tick();
    expect(ran).toEqual([]);
    time.advance(60);
    await h.services.timers.tick();
    expect((await until(body.data.id, 'completed')).output.word).toBe('later\n');
  });

  it('keeps an event raised while pending for the wait, and terminates a pending instance for good', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    const startAt = new Date(time.clock().getTime() + 60_000).toISOString();
    const early = (await api('POST', '/orchestrations', { name: 'wait', start_at: startAt })).body.data;
    expect((await api('POST', `/orchestrations/${early.id}/events`, { name: 'go', data: 'early' })).status).toBe(202);
    expect((await api('GET', `/orchestrations/${early.id}`)).body.data.status).toBe('pending');
    const stopped = (await api('POST', '/orchestrations', { name: 'wait', start_at: startAt })).body.data;
    const terminated = await api('POST', `/orchestrations/${stopped.id}/terminate`, { reason: 'not needed' });
    expect(terminated.body.data).toMatchObject({ status: 'terminated', error: 'not needed' });
    time.advance(60);
    await h.services.timers.tick();
    expect((await until(early.id, 'completed')).output).toBe('early');
    expect((await api('GET', `/orchestrations/${stopped.id}`)).body.data).toMatchObject({ status: 'terminated', started_at: null });
  });

  it('purges finished instances after the retention', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'quick', steps: [{ id: 'x', type: 'set', value: 1 }] });
    const { body } = await api('POST', '/orchestrations', { name: 'quick' });
    expect(body.data.status).toBe('completed');
    time.advance(29 * 86_400);
    await h.services.timers.tick();
    expect((await api('GET', `/orchestrations/${body.data.id}`)).status).toBe(200);
    time.advance(2 * 86_400);
    await h.services.timers.tick();
    expect((await api('GET', `/orchestrations/${body.data.id}`)).status).toBe(404);
  });

  it('lists newest first with limit and before', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'quick', steps: [{ id: 'x', type: 'set', value: 1 }] });
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) {
      ids.push((await api('POST', '/orchestrations', { name: 'quick' })).body.data.id);
      time.advance(1);
    }
    expect((await api('GET', '/orchestrations?limit=2')).body.data.map((entry: { id: string }) => entry.id)).toEqual([ids[2], ids[1]]);
    expect((await api('GET', `/orchestrations?before=${ids[1]}`)).body.data.map((entry: { id: string }) => entry.id)).toEqual([ids[0]]);
    expect((await api('GET', '/orchestrations?status=sleeping')).status).toBe(400);
    expect((await api('GET', '/orchestrations?limit=0')).status).toBe(400);
  });

  it('a schedule starts an instance once per idempotency key', async () => {
    await api('POST', '/orchestrations/definitions', { name: 'quick', steps: [{ id: 'x', type: 'set', value: '${input.n}' }] });
    const first = await h.services.orchestrations.start({ definition: 'quick', input: { n: 1 }, idempotency_key: 'schedule:s:1' });
    const again = await h.services.orchestrations.start({ definition: 'quick', input: { n: 1 }, idempotency_key: 'schedule:s:1' });
    expect(again.orchestration_id).toBe(first.orchestration_id);
    expect((await api('GET', `/orchestrations/${first.orchestration_id}`)).body.data.output).toBe(1);
    await expect(h.services.orchestrations.requireDefinition('nothing')).rejects.toThrow("orchestration definition 'nothing' not found");
    const schedule = await api('POST', '/schedules', { name: 'nightly', cron: '@daily', target_orchestration: 'quick', method: 'start', args: { n: 7 } });
    expect(schedule.status).toBe(201);
    const run = await api('POST', '/schedules/nightly/trigger');
    expect(run.body.data.status).toBe('succeeded');
    expect((await api('GET', `/orchestrations/${run.body.data.orchestration_id}`)).body.data.output).toBe(7);
  });
});

describe('OpenAPI', () => {
  it('documents every orchestration route with its schemas', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths).filter((path) => path.startsWith('/orchestrations'))).toEqual([
      '/orchestrations/definitions',
      '/orchestrations/definitions/{name}',
      '/orchestrations',
      '/orchestrations/{id}',
      '/orchestrations/{id}/events',
      '/orchestrations/{id}/terminate',
    ]);
    expect(Object.keys(doc.paths['/orchestrations/{id}'])).toEqual(['get', 'delete']);
    expect(Object.keys(doc.paths['/orchestrations']['post'].responses)).toEqual(expect.arrayContaining(['200', '202', '404', '409', '413']));
    expect(doc.components.schemas).toHaveProperty('OrchestrationInstance');
    expect(doc.components.schemas).toHaveProperty('StartOrchestration');
  });
});
