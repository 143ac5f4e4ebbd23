import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { injectClient } from '../../../../../src/client/inject-client.js';
import { objectTools } from '../../../../../src/mcp/tools/object-tools.js';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';
import { manualClock } from '../../../../helpers/manual-clock.js';
import { EXIT, GARBAGE, HANG, RawResult, scriptObjectRunner, type DoubleClasses } from '../../../../helpers/object-runner-double.js';

const COUNTER: DoubleClasses = {
  counter: {
    increment: (args: { by?: number }, ctx) => {
      const next = (ctx.storage.get('count', 0) as number) + (args.by ?? 1);
      ctx.storage.put('count', next);
      ctx.log(`count is ${next}`);
      return next;
    },
    get: (_args, ctx) => ctx.storage.get('count', 0),
    putThenThrow: (_args, ctx) => {
      ctx.storage.put('count', -1);
      throw new TypeError('x is undefined');
    },
    grow: (args: { bytes: number }, ctx) => ctx.storage.put('blob', 'x'.repeat(args.bytes)),
    hang: () => HANG,
    garbage: () => GARBAGE,
    deep: () => new RawResult(`${'['.repeat(100_000)}${']'.repeat(100_000)}`),
    exit: () => EXIT,
    schedule: (args: { at: string }, ctx) => ctx.setAlarm(args.at, 'ring', { n: 1 }),
    ring: (args: { n: number }, ctx) => {
      ctx.storage.put('rang', ((ctx.storage.get('rang', 0) as number) + args.n) as number);
      return 'rang';
    },
    alarm: (_args, ctx) => ctx.storage.put('alarmed', true),
  },
};

let h: FakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** How calls reach the runner: a process per call, or the persistent workers. */
type Mode = 'process' | 'worker';
let mode: Mode = 'process';

async function setup(clock = manualClock(), classes = COUNTER) {
  h = await fakeHarness({ poolSize: 0 }, clock.clock, { enabled: true, backlog: 1000, webhookUrls: [] });
  if (mode === 'worker') h.backend.declare('workers');
  const runner = scriptObjectRunner(h.backend, classes);
  const events: string[] = [];
  h.services.observability.bus.subscribe((p) => events.push(p.event.type));
  const define = (body: object = {}) =>
    h!.app.inject({ method: 'POST', url: '/objects/classes', payload: { name: 'counter', runtime: 'node', source: 'export const x = 1;', ...body } });
  const call = (method: string, args?: unknown, headers: Record<string, string> = {}, object = 'alice') =>
    h!.app.inject({ method: 'POST', url: `/objects/counter/${object}/call/${method}`, ...(args !== undefined ? { payload: args as object } : {}), headers });
  return { h, runner, events, define, call, clock };
}

describe.each(['process', 'worker'] as const)('durable objects over the fake backend (%s per call)', (each) => {
  beforeEach(() => {
    mode = each;
  });

  it('auto-creates an object on its first call, wakes it, runs the method and keeps its storage', async () => {
    const { define, call, events, runner } = await setup();
    expect((await define()).statusCode).toBe(201);
    const first = await call('increment', { by: 2 });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ success: true, data: 2 });
    expect(first.headers['x-sandboxd-cold-start']).toBe('true');
    expect(first.headers['x-sandboxd-object-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect((await call('increment')).json().data).toBe(3);
    const object = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    expect(object).toMatchObject({ class: 'counter', object_id: 'alice', status: 'active', storage: { count: 3 }, call_count: 2, sandbox_managed: true });
    expect(object.sandbox).toBe(`obj-${object.id.replaceAll('-', '')}`);
    const sandbox = (await h!.app.inject({ url: `/sandboxes/${object.sandbox}` })).json().data;
    expect(sandbox.labels).toMatchObject({ 'sandboxd.object': object.id, 'sandboxd.object.class': 'counter' });
    // The object's sandbox is the server's own: left out of the list unless asked for.
    expect(sandbox.internal).toBe(true);
    const names = async (query = '') => ((await h!.app.inject({ url: `/sandboxes${query}` })).json().data as { name: string }[]).map((s) => s.name);
    await h!.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'mine' } });
    expect(await names()).toEqual(['mine']);
    expect(await names('?internal=false')).toEqual(['mine']);
    expect((await names('?internal=true')).sort()).toEqual(['mine', object.sandbox].sort());
    const listed = (await h!.app.inject({ url: '/sandboxes?internal=true' })).json().data as { name: string; internal?: boolean }[];
    expect(listed.find((s) => s.name === 'mine')).not.toHaveProperty('internal');
    expect((await h!.app.inject({ url: '/sandboxes?internal=yes' })).json()).toMatchObject({ code: 'BAD_REQUEST', error: expect.stringContaining('internal') });
    expect(events).toEqual(expect.arrayContaining(['object.created', 'object.woken']));
    // The first call of the version described the module; later calls went straight to the method.
    expect(runner.calls).toEqual(['__describe', 'increment', 'increment']);
    // One worker, the object's own, served the describe and both calls, in the class folder, with the object's class in its environment.
    if (mode === 'worker') {
      expect(h!.backend.workerStarts).toHaveLength(1);
      expect(h!.backend.workerStarts[0]!.key).toBe(`obj.counter.v1.${object.id}`);
      expect(h!.backend.workerStarts[0]!.request).toMatchObject({ workdir: '/workspace/.sandboxd/objects/counter', env: { SANDBOXD_OBJECT_CLASS: 'counter' } });
    }
    const klass = (await h!.app.inject({ url: '/objects/classes/counter' })).json().data;
    expect(klass.methods).toContain('increment');
    expect(klass.object_count).toBe(1);
  });

  it('runs 50 concurrent calls to one object one at a time: no lost update', async () => {
    const { define, call } = await setup();
    await define();
    const results = await Promise.all(Array.from({ length: 50 }, () => call('increment')));
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect((await call('get')).json().data).toBe(50);
  });

  it('writes nothing when the method throws, and says what it threw', async () => {
    const { define, call } = await setup();
    await define();
    await call('increment', { by: 5 });
    const before = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    const failed = await call('putThenThrow');
    expect(failed.statusCode).toBe(422);
    expect(failed.json()).toMatchObject({ code: 'METHOD_FAILED', error: 'counter/alice.putThenThrow threw TypeError: x is undefined' });
    expect(failed.json().details).toMatchObject({ name: 'TypeError', message: 'x is undefined' });
    const after = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    expect(JSON.stringify(after.storage)).toBe(JSON.stringify(before.storage));
    const log = (await h!.app.inject({ url: '/objects/counter/alice/calls' })).json().data;
    expect(log[0]).toMatchObject({ method: 'putThenThrow', outcome: 'threw', source: 'http' });
  });

  it("logs who called: http, or mcp for sandboxd's MCP tool", async () => {
    const { define, call } = await setup();
    // The in-process client hooks the app: it is made before the first request.
    const api = injectClient(h!.app, 'test');
    await define();
    await call('increment');
    const tool = objectTools.find((t) => t.name === 'object_call')!;
    await tool.handle({ class: 'counter', object_id: 'alice', method: 'increment', args: { by: 2 } }, { api, signal: new AbortController().signal } as never);
    const log = (await h!.app.inject({ url: '/objects/counter/alice/calls' })).json().data;
    expect(log.map((c: { source: string }) => c.source)).toEqual(['mcp', 'http']);
    expect((await call('get', {}, { 'x-sandboxd-client': 'cli' })).statusCode).toBe(400);
  });

  it('applies the same Idempotency-Key once and replays its result', async () => {
    const { define, call } = await setup();
    await define();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await call('increment', {}, { 'idempotency-key': 'k-1' }));
    expect(answers.map((a) => a.json().data)).toEqual(Array(10).fill(1));
    expect(answers[0]!.headers['idempotent-replay']).toBeUndefined();
    expect(answers[9]!.headers['idempotent-replay']).toBe('true');
    expect((await call('get')).json().data).toBe(1);
    expect((await call('increment', {}, { 'idempotency-key': 'x'.repeat(129) })).statusCode).toBe(400);
  });

  it('refuses an Idempotency-Key sent again with another method or body: 422 naming the key, not the other call\'s answer', async () => {
    const { define, call } = await setup();
    await define();
    expect((await call('increment', { by: 2 }, { 'idempotency-key': 'k-2' })).json().data).toBe(2);
    const otherBody = await call('increment', { by: 5 }, { 'idempotency-key': 'k-2' });
    expect(otherBody.statusCode).toBe(422);
    expect(otherBody.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', error: expect.stringContaining("Idempotency-Key 'k-2' was used for another call of 'counter/alice'") });
    const otherMethod = await call('get', { by: 2 }, { 'idempotency-key': 'k-2' });
    expect(otherMethod.statusCode).toBe(422);
    expect(otherMethod.json().code).toBe('IDEMPOTENCY_KEY_REUSED');
    // The same method and body (keys in another order are the same body) still replays.
    const again = await call('increment', { by: 2 }, { 'idempotency-key': 'k-2' });
    expect(again.json().data).toBe(2);
    expect(again.headers['idempotent-replay']).toBe('true');
    expect((await call('get')).json().data).toBe(2);
  });

  it('fails a call past its timeout, a worker that prints garbage or exits, and writes nothing', async () => {
    const { define, call } = await setup();
    await define({ timeout_ms: 200 });
    await call('increment');
    const timedOut = await call('hang');
    expect(timedOut.statusCode).toBe(504);
    expect(timedOut.json()).toMatchObject({ code: 'TIMEOUT' });
    expect(timedOut.json().error).toContain('counter/alice.hang did not finish within 200 ms');
    expect((await call('garbage')).json()).toMatchObject({ code: 'METHOD_FAILED' });
    // An answer nested 100,000 levels deep fails the call naming the bound, before any walk of it.
    const deep = await call('deep');
    expect(deep.statusCode).toBeLessThan(500);
    expect(deep.json()).toMatchObject({ code: 'METHOD_FAILED', error: "counter/alice.deep failed: the method's answer is nested deeper than 64 levels of arrays and objects; nothing was written" });
    const exited = await call('exit');
    expect(exited.statusCode).toBe(422);
    expect(exited.json().error).toContain('counter/alice.exit failed');
    expect((await call('hang', undefined, {}, 'alice')).statusCode).toBe(504);
    expect((await h!.app.inject({ method: 'POST', url: '/objects/counter/alice/call/get?timeout_ms=500' })).statusCode).toBe(400);
    expect((await call('get')).json().data).toBe(1);
    const outcomes = (await h!.app.inject({ url: '/objects/counter/alice/calls?limit=3' })).json().data.map((c: { outcome: string }) => c.outcome);
    expect(outcomes).toEqual(['ok', 'timeout', 'error']);
    // Each failed call took its worker down; the next call started a new one.
    if (mode === 'worker') expect(h!.backend.workerStarts.length).toBe(5);
  });

  it('answers 404 for an unregistered class and an unknown method (without running anything once the methods are known)', async () => {
    const { define, call, runner } = await setup();
    const unregistered = await call('increment');
    expect(unregistered.statusCode).toBe(404);
    expect(unregistered.json().error).toBe("class 'counter' is not registered: register it first with POST /objects/classes");
    await define();
    const missing = await call('nope');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toMatch(/^method 'nope' not found on class 'counter' \(methods: .*increment/);
    const seen = runner.calls.length;
    expect((await call('nope')).statusCode).toBe(404);
    expect(runner.calls.length).toBe(seen);
  });

  it('refuses storage past the class limit with 413 and writes nothing', async () => {
    const { define, call } = await setup();
    await define({ max_storage_bytes: 2048 });
    expect((await call('grow', { bytes: 100 })).statusCode).toBe(200);
    const big = await call('grow', { bytes: 4096 });
    expect(big.statusCode).toBe(413);
    expect(big.json().error).toMatch(/over its limit of 2048: nothing was written/);
    const object = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    expect(object.storage.blob).toHaveLength(100);
  });

  it('refuses bad names, bodies and queries with 400 naming the field', async () => {
    const { define } = await setup();
    await define();
    const cases: [string, string, object | undefined, string][] = [
      ['POST', '/objects/classes', { name: 'classes', runtime: 'node', source: 'x' }, "name: 'classes' is reserved"],
      ['POST', '/objects/classes', { name: '9x', runtime: 'node', source: 'x' }, 'name: must match'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'ruby', source: 'x' }, 'runtime: must be node or python'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'node' }, 'source: give exactly one of source and handlers'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'node', source: 'x', handlers: { a: '() => 1' } }, 'source: give exactly one'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'python', handlers: { a: '() => 1' } }, 'handlers: handlers are for the node runtime only'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'node', source: 'x', timeout_ms: 300001 }, 'timeout_ms: must be at most 300000'],
      ['POST', '/objects/classes', { name: 'a', runtime: 'node', source: 'x', max_storage_bytes: 17 * 1024 * 1024 }, 'max_storage_bytes: must be at most'],
      ['POST', '/objects/counter/bad%20id/call/increment', undefined, 'object_id: must match'],
      ['POST', '/objects/counter/alice/call/_private', undefined, 'method: must match'],
      ['POST', '/objects', { class: 'counter' }, 'object_id: is required'],
      ['GET', '/objects?limit=0', undefined, 'limit: must be at least 1'],
      ['GET', '/objects/not-a-uuid', undefined, 'id: must be an object id'],
      ['PATCH', '/objects/01890000-0000-7000-8000-000000000000', {}, 'give storage, status or both'],
      ['POST', '/objects/counter/alice/alarm', { at: 'soon' }, 'at:'],
      ['POST', '/objects/counter/alice/alarm', { in_seconds: 40_000_000 }, 'in_seconds: must be at most a year'],
      ['POST', '/objects/counter/alice/alarm', { method: 'ring' }, 'at: give at or in_seconds'],
    ];
    for (const [method, url, payload, message] of cases) {
      const res = await h!.app.inject({ method: method as 'POST', url, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(400);
      expect(res.json().error, `${method} ${url}`).toContain(message);
    }
  });

  it('reports a syntax error at registration as a 400 naming the line', async () => {
    const { define } = await setup();
    const res = await define({ source: 'const a = 1;\n\nfoo(SYNTAX ERROR;\n', validate: true });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe("source: SyntaxError: Unexpected identifier 'ERROR' (3:7)");
    const python = await define({ runtime: 'python', source: 'def f(a, ctx):\n  return 1\nSYNTAX ERROR\n' });
    expect(python.json().error).toBe('source: SyntaxError: invalid syntax (3:7)');
  });

  it('versions a class: the same definition keeps its version, a change adds one', async () => {
    const { define } = await setup();
    expect((await define()).json().data.version).toBe(1);
    const again = await define();
    expect(again.statusCode).toBe(200);
    expect(again.json().data.version).toBe(1);
    expect((await define({ timeout_ms: 5000 })).json().data.version).toBe(2);
    expect((await define({ source: 'export const y = 2;' })).json().data.version).toBe(3);
    const listed = (await h!.app.inject({ url: '/objects/classes' })).json().data;
    expect(listed[0]).not.toHaveProperty('source');
  });

  it('creates, patches, lists and deletes objects; a class with objects cannot be deleted', async () => {
    const { define, call, events } = await setup();
    await define();
    const created = await h!.app.inject({ method: 'POST', url: '/objects', payload: { class: 'counter', object_id: 'bob', storage: { count: 41 } } });
    expect(created.statusCode).toBe(201);
    const bob = created.json().data;
    expect(bob).toMatchObject({ status: 'hibernating', storage: { count: 41 }, alarm: null });
    expect((await h!.app.inject({ method: 'POST', url: '/objects', payload: { class: 'counter', object_id: 'bob' } })).statusCode).toBe(409);
    expect((await h!.app.inject({ method: 'POST', url: '/objects', payload: { class: 'counter', object_id: 'c', sandbox: 'nope' } })).statusCode).toBe(404);
    expect((await call('increment', {}, {}, 'bob')).json().data).toBe(42);
    const patched = await h!.app.inject({ method: 'PATCH', url: `/objects/${bob.id}`, payload: { storage: { count: 7 }, status: 'hibernating' } });
    expect(patched.json().data).toMatchObject({ storage: { count: 7 }, status: 'hibernating' });
    const sandbox = (await h!.app.inject({ url: `/sandboxes/${bob.sandbox}` })).json().data;
    expect(sandbox.status).toBe('stopped');
    expect((await h!.app.inject({ url: '/objects?status=hibernating' })).json().data.map((o: { object_id: string }) => o.object_id)).toEqual(['bob']);
    const blocked = await h!.app.inject({ method: 'DELETE', url: '/objects/classes/counter' });
    expect(blocked.statusCode).toBe(409);
    expect(blocked.json().error).toBe("class 'counter' has 1 object: delete it first");
    const deleted = await h!.app.inject({ method: 'DELETE', url: `/objects/${bob.id}` });
    expect(deleted.json().data).toBe("object 'counter/bob' deleted");
    expect((await h!.app.inject({ url: `/sandboxes/${bob.sandbox}` })).statusCode).toBe(404);
    expect(events).toContain('object.deleted');
    expect((await h!.app.inject({ method: 'DELETE', url: '/objects/classes/counter' })).statusCode).toBe(200);
  });

  it('keeps a call queue per object and refuses past 64 waiting calls with 429 BUSY', async () => {
    const { define, call } = await setup();
    // The hanging call holds the object while the 63 others join its queue.
    await define({ timeout_ms: 3000 });
    const first = call('hang');
    // The first call makes the object: its id once it exists.
    const id = async () => (await h!.app.inject({ url: '/objects/counter/alice' })).json().data?.id as string | undefined;
    await waitFor(async () => h!.services.objects.queued((await id()) ?? '') === 1);
    const queued = Array.from({ length: 63 }, () => call('increment'));
    // Each call reads its class and object before it joins the queue: all 63 have joined.
    await waitFor(async () => h!.services.objects.queued((await id()) ?? '') === 64);
    const refused = await call('increment');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'BUSY' });
    expect((await first).statusCode).toBe(504);
    expect((await Promise.all(queued)).every((r) => r.statusCode === 200)).toBe(true);
  });

  it('fires an alarm when due through the timers: its writes and the alarm clear commit together', async () => {
    const clock = manualClock();
    const { define, call } = await setup(clock);
    await define();
    await call('schedule', { at: '2026-01-01T00:00:30.000Z' });
    const set = (await h!.app.inject({ url: '/objects/counter/alice/alarm' })).json().data;
    expect(set.alarm).toMatchObject({ fire_at: '2026-01-01T00:00:30.000Z', method: 'ring', args: { n: 1 }, attempts: 0 });
    clock.advance(10);
    await h!.services.timers.tick();
    expect((await h!.app.inject({ url: '/objects/counter/alice' })).json().data.storage.rang).toBeUndefined();
    clock.advance(25);
    await h!.services.timers.tick();
    await waitFor(async () => (await h!.app.inject({ url: '/objects/counter/alice' })).json().data.storage.rang === 1);
    const after = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    expect(after.alarm).toBeNull();
    const log = (await h!.app.inject({ url: '/objects/counter/alice/calls?limit=1' })).json().data[0];
    expect(log).toMatchObject({ method: 'ring', source: 'alarm', outcome: 'ok' });
    expect(log.idempotency_key).toBe(`alarm:${after.id}:${Date.parse('2026-01-01T00:00:30.000Z')}`);
  });

  it('retries a failing alarm with back-off and gives it up after 6 retries', async () => {
    const clock = manualClock();
    const { define, events } = await setup(clock, { counter: { ...COUNTER.counter!, alarm: () => { throw new Error('no'); } } });
    await define();
    const set = await h!.app.inject({ method: 'POST', url: '/objects/counter/zed/alarm', payload: { in_seconds: 1 } });
    expect(set.json().data.alarm.method).toBe('alarm');
    expect((await h!.app.inject({ url: '/objects/counter/zed' })).json().data.status).toBe('hibernating');
    const waits = [1, 2, 4, 8, 16, 32, 64];
    for (const [i, wait] of waits.entries()) {
      clock.advance(wait);
      await h!.services.timers.tick();
      await waitFor(async () => {
        const object = (await h!.app.inject({ url: '/objects/counter/zed' })).json().data;
        return i < 6 ? object.alarm?.attempts === i + 1 : object.alarm === null;
      });
    }
    const object = (await h!.app.inject({ url: '/objects/counter/zed' })).json().data;
    expect(object.last_alarm_error).toContain('counter/zed.alarm threw Error: no');
    expect(events).toContain('object.alarm.failed');
  });

  it('hibernates an object idle past its timeout and wakes it on the next call', async () => {
    const clock = manualClock();
    const { define, call, events } = await setup(clock);
    await define({ idle_timeout_seconds: 60 });
    await call('increment');
    const object = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    clock.advance(59);
    await h!.services.timers.tick();
    expect((await h!.app.inject({ url: '/objects/counter/alice' })).json().data.status).toBe('active');
    clock.advance(2);
    await h!.services.timers.tick();
    expect((await h!.app.inject({ url: '/objects/counter/alice' })).json().data.status).toBe('hibernating');
    expect((await h!.app.inject({ url: `/sandboxes/${object.sandbox}` })).json().data.status).toBe('stopped');
    expect(events).toContain('object.hibernated');
    const woken = await call('increment');
    expect(woken.json().data).toBe(2);
    expect(woken.headers['x-sandboxd-cold-start']).toBe('true');
    expect((await h!.app.inject({ url: '/objects/counter/alice' })).json().data.status).toBe('active');
  });

  it('makes the managed sandbox again when it was deleted; the storage survives', async () => {
    const { define, call } = await setup();
    await define();
    await call('increment', { by: 3 });
    const object = (await h!.app.inject({ url: '/objects/counter/alice' })).json().data;
    expect((await h!.app.inject({ method: 'DELETE', url: `/sandboxes/${object.sandbox}` })).statusCode).toBe(200);
    expect((await call('increment')).json().data).toBe(4);
  });

  it('refuses calls once the service closes', async () => {
    const { define, call } = await setup();
    await define();
    h!.services.objects.close();
    const res = await call('increment');
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toContain('shutting down');
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
