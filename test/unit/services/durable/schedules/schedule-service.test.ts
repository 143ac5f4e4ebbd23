import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { notFound, ServiceError } from '../../../../../src/errors.js';
import type { CreateScheduleInput } from '../../../../../src/schemas/schedule-schemas.js';
import { DurableTimers, NO_ORCHESTRATIONS, type ObjectCaller, type OrchestrationStarter, type ObjectCallInput } from '../../../../../src/services/durable/index.js';
import { ScheduleService } from '../../../../../src/services/durable/schedules/index.js';
import { ScheduleRepository } from '../../../../../src/state/schedule-repository.js';
import { silentLogger } from '../../../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';
import { manualClock } from '../../../../helpers/manual-clock.js';

/**
 * A durable object as schedules see it: each idempotency key has one effect (a counter per key),
 * and a repeat answers with the first result, as the object service promises. `hold` makes calls
 * wait (a run in flight); `fail` makes them throw.
 */
class ObjectDouble implements ObjectCaller {
  readonly effects = new Map<string, number>();
  readonly calls: ObjectCallInput[] = [];
  hold: Promise<void> | undefined;
  fail = false;
  private opens: (() => void)[] = [];

  /** Calls from now on wait until `release()`. */
  holdCalls(): void {
    this.hold = new Promise((resolve) => this.opens.push(resolve));
  }

  /** Lets every held call go on; later calls do not wait. */
  release(): void {
    this.hold = undefined;
    for (const open of this.opens.splice(0)) open();
  }

  async requireClass(name: string): Promise<void> {
    if (name !== 'Counter') throw notFound(`class '${name}' is not registered`, { hint: { action: 'register_class', class: name } });
  }

  async callObject(input: ObjectCallInput): Promise<unknown> {
    this.calls.push(input);
    const key = input.idempotency_key!;
    if (!this.effects.has(key)) this.effects.set(key, 1);
    // The effect is committed before the answer: a crash while held loses the answer, not the effect.
    if (this.hold) await this.hold;
    if (this.fail) throw new ServiceError('METHOD_FAILED', 'method threw: boom');
    return { count: this.effects.size };
  }
}

let h: FakeHarness;
let clock: ReturnType<typeof manualClock>;
let objects: ObjectDouble;
let svc: ScheduleService;
let timers: DurableTimers;
const opened: ScheduleService[] = [];

/** A schedule service on the harness's store with its own driver, the object double as its objects. */
function scheduleService(caller: ObjectCaller = objects, orchestrations: OrchestrationStarter = NO_ORCHESTRATIONS): { service: ScheduleService; timers: DurableTimers } {
  const driver = new DurableTimers({ clock: clock.clock, logger: silentLogger() });
  const service = new ScheduleService({
    repos: { schedules: new ScheduleRepository(h.store.db, h.store.sql) },
    clock: clock.clock,
    logger: silentLogger(),
    timers: driver,
    audit: h.services.audit,
    sandboxes: h.services.sandboxes,
    exec: h.services.exec,
    runs: h.services.runs,
    objects: caller,
    orchestrations,
    metrics: h.services.observability.metrics,
  });
  driver.register(service.firing);
  opened.push(service);
  return { service, timers: driver };
}

const counter = (over: Partial<CreateScheduleInput> = {}): CreateScheduleInput => ({
  name: 'tick',
  method: 'increment',
  cron: '* * * * *',
  target_class: 'Counter',
  target_object_id: 'c1',
  ...over,
});

/** Moves the clock to `iso` and runs one tick of the driver, then waits for the handed-off runs. */
async function at(iso: string, driver = timers, service = svc): Promise<void> {
  clock.advance((Date.parse(iso) - clock.clock().getTime()) / 1000);
  await driver.tick();
  await service.settled();
}

const runsOf = async (name: string, service = svc) => service.runs(name, { limit: 100 });

beforeEach(async () => {
  clock = manualClock('2026-01-01T00:00:00.000Z');
  h = await fakeHarness({}, clock.clock, { enabled: true, backlog: 100, webhookUrls: [] });
  objects = new ObjectDouble();
  ({ service: svc, timers } = scheduleService());
});

afterEach(async () => {
  objects.release();
  for (const service of opened.splice(0)) {
    service.close();
    await service.settled();
  }
  await h.close();
});

describe('firing', () => {
  it('fires at the occurrence, not before, and moves next_fire_at to the next one', async () => {
    const created = await svc.create(counter());
    expect(created).toMatchObject({ status: 'active', next_fire_at: '2026-01-01T00:01:00.000Z', timezone: 'UTC', overlap: 'skip', misfire: 'fire_once' });
    await at('2026-01-01T00:00:59.999Z');
    expect(await runsOf('tick')).toEqual([]);
    await at('2026-01-01T00:01:00.000Z');
    const [run] = await runsOf('tick');
    expect(run).toMatchObject({ scheduled_for: '2026-01-01T00:01:00.000Z', started_at: '2026-01-01T00:01:00.000Z', status: 'succeeded', missed_count: 0, result: { count: 1 } });
    expect(objects.calls[0]).toMatchObject({ class: 'Counter', object_id: 'c1', method: 'increment', source: 'schedule', idempotency_key: `schedule:${created.id}:2026-01-01T00:01:00.000Z` });
    expect(await svc.get('tick')).toMatchObject({ next_fire_at: '2026-01-01T00:02:00.000Z', fire_count: 1, last_run_status: 'succeeded', last_fired_at: '2026-01-01T00:01:00.000Z' });
    // The driver arms for the next occurrence (waiting 30 s at most between reads).
    await timers.start();
    expect(timers.nextWake?.at.toISOString()).toBe('2026-01-01T00:01:30.000Z');
    clock.advance(45);
    await timers.poke();
    expect(timers.nextWake?.at.toISOString()).toBe('2026-01-01T00:02:00.000Z');
    const metrics = (await h.services.observability.metrics.scrape()).text;
    expect(metrics).toContain('sandboxd_schedule_runs_total{status="succeeded"} 1');
    expect(metrics).toMatch(/sandboxd_schedule_lag_seconds_count 1/);
  });

  it('catches up with fire_once: the latest missed occurrence fires once, the others folded into missed_count', async () => {
    await svc.create(counter());
    await at('2026-01-01T00:05:30.000Z');
    const runs = await runsOf('tick');
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ scheduled_for: '2026-01-01T00:05:00.000Z', missed_count: 4, status: 'succeeded' });
    expect(objects.calls).toHaveLength(1);
    expect((await svc.get('tick')).next_fire_at).toBe('2026-01-01T00:06:00.000Z');
  });

  it('catches up with skip: late occurrences are one missed run, the on-time one fires', async () => {
    await svc.create(counter({ misfire: 'skip' }));
    await at('2026-01-01T00:05:30.000Z');
    const [fired, missed] = await runsOf('tick');
    expect(missed).toMatchObject({ scheduled_for: '2026-01-01T00:04:00.000Z', missed_count: 4, status: 'missed' });
    expect(fired).toMatchObject({ scheduled_for: '2026-01-01T00:05:00.000Z', missed_count: 0, status: 'succeeded' });
    // Every due occurrence late (server down 90 minutes under an hourly cron): only the missed record.
    objects.calls.length = 0;
    await svc.create(counter({ name: 'hourly', cron: '0 * * * *', misfire: 'skip' }));
    await at('2026-01-01T02:30:00.000Z');
    expect(await runsOf('hourly')).toMatchObject([{ status: 'missed', scheduled_for: '2026-01-01T02:00:00.000Z', missed_count: 2 }]);
    const hourly = (await svc.get('hourly')).id;
    expect(objects.calls.filter((c) => c.idempotency_key?.includes(hourly))).toEqual([]);
    expect((await svc.get('hourly')).next_fire_at).toBe('2026-01-01T03:00:00.000Z');
  });

  it('records a firing while the previous run still runs as skipped (overlap skip), and runs it with overlap allow', async () => {
    objects.holdCalls();
    await svc.create(counter({ cron: '* * * * * *' }));
    await svc.create(counter({ name: 'both', cron: '* * * * * *', overlap: 'allow' }));
    clock.advance(1);
    await timers.tick();
    clock.advance(1);
    await timers.tick();
    expect((await runsOf('tick')).map((r) => r.status)).toEqual(['skipped', 'running']);
    expect((await runsOf('both')).map((r) => r.status)).toEqual(['running', 'running']);
    objects.release();
    await svc.settled();
    expect((await runsOf('tick')).map((r) => r.status)).toEqual(['skipped', 'succeeded']);
    expect((await runsOf('both')).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('pauses (nothing fires, next_fire_at null) and resumes from now without catching up the paused time', async () => {
    await svc.create(counter());
    await at('2026-01-01T00:00:30.000Z');
    expect(await svc.update('tick', { status: 'paused' })).toMatchObject({ status: 'paused', next_fire_at: null });
    await at('2026-01-01T00:05:10.000Z');
    expect(await runsOf('tick')).toEqual([]);
    expect(await svc.update('tick', { status: 'active' })).toMatchObject({ status: 'active', next_fire_at: '2026-01-01T00:06:00.000Z' });
    await at('2026-01-01T00:06:00.000Z');
    expect(await runsOf('tick')).toMatchObject([{ scheduled_for: '2026-01-01T00:06:00.000Z', missed_count: 0 }]);
  });

  it('completes a cron schedule whose end_at leaves no further occurrence', async () => {
    await svc.create(counter({ end_at: '2026-01-01T00:03:30Z' }));
    for (const minute of ['01', '02']) await at(`2026-01-01T00:${minute}:00.000Z`);
    expect((await svc.get('tick')).status).toBe('active');
    await at('2026-01-01T00:03:00.000Z');
    expect(await svc.get('tick')).toMatchObject({ status: 'completed', next_fire_at: null, fire_count: 3 });
    await at('2026-01-01T00:10:00.000Z');
    expect(await runsOf('tick')).toHaveLength(3);
  });

  it('completes a one-shot whose run succeeded, and fails one whose run failed', async () => {
    await svc.create(counter({ name: 'ok', cron: undefined, fire_at: '2026-01-01T00:00:10Z' }));
    await at('2026-01-01T00:00:10.000Z');
    expect(await svc.get('ok')).toMatchObject({ status: 'completed', next_fire_at: null, last_run_status: 'succeeded' });
    objects.fail = true;
    await svc.create(counter({ name: 'bad', cron: undefined, fire_at: '2026-01-01T00:00:20Z' }));
    const events: unknown[] = [];
    h.services.observability.bus.subscribe(({ event }) => events.push(event));
    await at('2026-01-01T00:00:20.000Z');
    expect(await svc.get('bad')).toMatchObject({ status: 'failed', last_run_status: 'failed' });
    expect((await runsOf('bad'))[0]).toMatchObject({ status: 'failed', error: 'method threw: boom' });
    const id = (await svc.get('bad')).id;
    expect(events).toEqual([
      expect.objectContaining({ type: 'schedule.run.failed', sandbox: '', sandbox_uuid: '', resource: { kind: 'schedule', id, name: 'bad' } }),
    ]);
  });

  it('records a one-shot missed under misfire skip as missed and completes it; fire_once fires it late', async () => {
    await svc.create(counter({ name: 'skipper', cron: undefined, fire_at: '2026-01-01T00:01:00Z', misfire: 'skip' }));
    await svc.create(counter({ name: 'late', cron: undefined, fire_at: '2026-01-01T00:01:00Z' }));
    await at('2026-01-01T00:03:00.000Z');
    expect(await svc.get('skipper')).toMatchObject({ status: 'completed', last_run_status: 'missed' });
    expect(await runsOf('late')).toMatchObject([{ status: 'succeeded', scheduled_for: '2026-01-01T00:01:00.000Z', missed_count: 0 }]);
    expect(objects.calls).toHaveLength(1);
  });

  it('reads cron in its time zone across DST: a skipped local time fires after the gap, a repeated one once', async () => {
    clock = manualClock('2026-03-28T12:00:00.000Z');
    await h.close();
    h = await fakeHarness({}, clock.clock);
    ({ service: svc, timers } = scheduleService());
    // 02:30 local does not exist in Berlin on 2026-03-29 (02:00 -> 03:00): it fires at 03:00 CEST.
    await svc.create(counter({ cron: '30 2 * * *', timezone: 'Europe/Berlin' }));
    expect((await svc.get('tick')).next_fire_at).toBe('2026-03-29T01:00:00.000Z');
    await at('2026-03-29T01:00:00.000Z');
    expect((await svc.get('tick')).next_fire_at).toBe('2026-03-30T00:30:00.000Z');
    // 02:30 local happens twice on 2026-10-25 (03:00 -> 02:00): once, at the first.
    await svc.update('tick', { status: 'paused' });
    clock.advance((Date.parse('2026-10-24T12:00:00Z') - clock.clock().getTime()) / 1000);
    expect((await svc.update('tick', { status: 'active' })).next_fire_at).toBe('2026-10-25T00:30:00.000Z');
    await at('2026-10-25T00:30:00.000Z');
    expect((await svc.get('tick')).next_fire_at).toBe('2026-10-26T01:30:00.000Z');
    // An interval job runs through the repeated hour on both passes.
    await svc.create(counter({ name: 'hourly', cron: '30 * * * *', timezone: 'Europe/Berlin' }));
    expect((await svc.get('hourly')).next_fire_at).toBe('2026-10-25T01:30:00.000Z');
    await at('2026-10-25T01:30:00.000Z');
    expect((await svc.get('hourly')).next_fire_at).toBe('2026-10-25T02:30:00.000Z');
  });
});

describe('robustness', () => {
  it('pauses a schedule whose stored cron cannot be read, and the others still fire', async () => {
    await svc.create(counter({ name: 'broken' }));
    await svc.create(counter({ name: 'fine' }));
    await h.store.sql.run("UPDATE schedules SET cron = 'not a cron' WHERE name = 'broken'");
    await at('2026-01-01T00:01:00.000Z');
    expect(await svc.get('broken')).toMatchObject({ status: 'paused', next_fire_at: null });
    expect(await runsOf('fine')).toMatchObject([{ status: 'succeeded' }]);
  });

  it('refuses a schedule past the limit with 429', async () => {
    const insert = "INSERT INTO schedules (id, name, timezone, method, status, overlap, misfire, created_at, updated_at) VALUES (?, ?, 'UTC', 'run', 'paused', 'skip', 'fire_once', '', '')";
    await h.store.sql.transaction(async (tx) => {
      for (let i = 0; i < 10_000; i++) await tx.run(insert, [`id-${i}`, `s-${i}`]);
    });
    const res = await h.app.inject({ method: 'POST', url: '/schedules', payload: { name: 'one-more', method: 'run', cron: '@daily', args: { command: ['true'] } } });
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ code: 'LIMIT_REACHED', error: 'at most 10000 schedules; delete some first' });
  });
});

describe('at most once', () => {
  it('fires one occurrence once however many ticks or services race for it', async () => {
    const other = scheduleService();
    await svc.create(counter());
    clock.advance(60);
    const repo = new ScheduleRepository(h.store.db, h.store.sql);
    const stale = (await repo.due(clock.clock().toISOString(), 10))[0]!;
    await Promise.all([timers.tick(), other.timers.tick(), timers.tick(), other.timers.tick()]);
    await Promise.all([svc.settled(), other.service.settled()]);
    expect(await runsOf('tick')).toHaveLength(1);
    expect(objects.calls).toHaveLength(1);
    // A claim made from a copy read before the winner's commit changes nothing: the conditional UPDATE.
    expect(await repo.claim(stale.id, stale.next_fire_at!, () => ({ update: { next_fire_at: null, status: 'active', fire_count_increment: 1, updated_at: '' }, runs: [] }))).toEqual([]);
    expect((await svc.get('tick')).next_fire_at).toBe('2026-01-01T00:02:00.000Z');
  });

  it('after a restart, a run that was in flight is interrupted and not fired again; a one-shot with it fails', async () => {
    await h.services.sandboxes.create({ name: 'box' });
    h.backend.onExec = () => ({ hang: true });
    await svc.create({ name: 'cmd', method: 'exec', target_sandbox: 'box', args: { command: ['sleep', '1000'], timeout_ms: 2000 }, fire_at: '2026-01-01T00:00:05Z' });
    clock.advance(5);
    await timers.tick();
    expect((await runsOf('cmd'))[0]!.status).toBe('running');
    // The crash: the first service is gone without recording anything; a new one starts on the same store.
    svc.close();
    const restarted = scheduleService();
    expect(await restarted.service.recover()).toEqual({ interrupted: 1, retried: 0 });
    expect(await runsOf('cmd', restarted.service)).toMatchObject([{ status: 'interrupted', error: expect.stringContaining('not fired again') }]);
    expect(await restarted.service.get('cmd')).toMatchObject({ status: 'failed', next_fire_at: null });
    await at('2026-01-01T00:10:00.000Z', restarted.timers, restarted.service);
    expect(await runsOf('cmd', restarted.service)).toHaveLength(1);
  });

  it('retries an object-method run once after a restart with the same idempotency key: one effect', async () => {
    objects.holdCalls();
    const created = await svc.create(counter());
    clock.advance(60);
    await timers.tick();
    expect(objects.calls).toHaveLength(1);
    // The crash comes after the object committed the call's effect, before the answer was recorded.
    svc.close();
    const held = objects.hold;
    objects.hold = undefined;
    const restarted = scheduleService();
    expect(await restarted.service.recover()).toEqual({ interrupted: 0, retried: 1 });
    await restarted.service.settled();
    const key = `schedule:${created.id}:2026-01-01T00:01:00.000Z`;
    expect(objects.calls.map((c) => c.idempotency_key)).toEqual([key, key]);
    expect(objects.effects.get(key)).toBe(1);
    expect(await runsOf('tick', restarted.service)).toMatchObject([{ status: 'succeeded', scheduled_for: '2026-01-01T00:01:00.000Z' }]);
    expect(held).toBeDefined();
  });

  it('retries an orchestration start once after a restart with the same idempotency key', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const keys: string[] = [];
    const starter: OrchestrationStarter = {
      requireDefinition: async () => undefined,
      async start({ idempotency_key }) {
        keys.push(idempotency_key);
        if (keys.length === 1) await held;
        return { orchestration_id: `orch-for-${idempotency_key}` };
      },
    };
    const first = scheduleService(objects, starter);
    const created = await first.service.create({ name: 'flow', method: 'start', cron: '* * * * *', target_orchestration: 'build', args: { n: 1 } });
    clock.advance(60);
    await first.timers.tick();
    first.service.close();
    const restarted = scheduleService(objects, starter);
    expect(await restarted.service.recover()).toEqual({ interrupted: 0, retried: 1 });
    await restarted.service.settled();
    const key = `schedule:${created.id}:2026-01-01T00:01:00.000Z`;
    expect(keys).toEqual([key, key]);
    expect(await runsOf('flow', restarted.service)).toMatchObject([{ status: 'succeeded', orchestration_id: `orch-for-${key}` }]);
    release();
  });

  it('interrupts an object-method run whose retry was in flight at a second crash (no third try)', async () => {
    objects.holdCalls();
    await svc.create(counter());
    clock.advance(60);
    await timers.tick();
    svc.close();
    const second = scheduleService();
    expect(await second.service.recover()).toEqual({ interrupted: 0, retried: 1 });
    second.service.close();
    const third = scheduleService();
    expect(await third.service.recover()).toEqual({ interrupted: 1, retried: 0 });
    expect(objects.calls).toHaveLength(2);
    expect(objects.effects.size).toBe(1);
    expect(await runsOf('tick', third.service)).toMatchObject([{ status: 'interrupted' }]);
    // A cron schedule goes on firing after an interrupted run.
    objects.release();
    await at('2026-01-01T00:02:00.000Z', third.timers, third.service);
    expect((await runsOf('tick', third.service))[0]).toMatchObject({ status: 'succeeded', scheduled_for: '2026-01-01T00:02:00.000Z' });
  });
});

describe('targets and history', () => {
  it('runs an exec target in its sandbox and a run target in a fresh one, keeping their results', async () => {
    await h.services.sandboxes.create({ name: 'box' });
    h.backend.onExec = (request) => ({ chunks: [{ stream: 'stdout', text: `ran ${request.command.join(' ')}\n` }], exit_code: request.command[0] === 'false' ? 1 : 0 });
    await svc.create({ name: 'in-box', method: 'exec', target_sandbox: 'box', args: { command: ['echo', 'hi'] }, cron: '* * * * *' });
    await svc.create({ name: 'fresh', method: 'run', args: { command: ['echo', 'fresh'] }, cron: '* * * * *' });
    await svc.create({ name: 'fails', method: 'exec', target_sandbox: 'box', args: { command: ['false'] }, cron: '* * * * *' });
    await at('2026-01-01T00:01:00.000Z');
    expect((await runsOf('in-box'))[0]).toMatchObject({ status: 'succeeded', result: { exit_code: 0, stdout: 'ran echo hi\n' } });
    expect((await runsOf('fresh'))[0]).toMatchObject({ status: 'succeeded', result: { exit_code: 0, stdout: 'ran echo fresh\n' } });
    expect((await runsOf('fails'))[0]).toMatchObject({ status: 'failed', error: 'the command exited with 1', result: { exit_code: 1 } });
    // A cron schedule keeps firing after a failed run.
    expect((await svc.get('fails')).status).toBe('active');
  });

  it('triggers now, also while paused, without moving next_fire_at or counting a firing, and counts triggers apart', async () => {
    await svc.create(counter({ status: 'paused' }));
    const run = await svc.trigger('tick');
    expect(run).toMatchObject({ status: 'succeeded', scheduled_for: '2026-01-01T00:00:00.000Z', result: { count: 1 } });
    expect(await svc.get('tick')).toMatchObject({ status: 'paused', next_fire_at: null, fire_count: 0, trigger_count: 1, last_run_status: 'succeeded' });
    const id = (await svc.get('tick')).id;
    const again = await svc.trigger(id);
    expect(await svc.get('tick')).toMatchObject({ fire_count: 0, trigger_count: 2 });
    expect(again).toMatchObject({ schedule_id: id, scheduled_for: run.scheduled_for, result: { count: 2 } });
    // Two triggers are two calls, even at the same instant: each is keyed by its run.
    expect(objects.calls.map((c) => c.idempotency_key)).toEqual([`schedule:${id}:trigger:${run.id}`, `schedule:${id}:trigger:${again.id}`]);
  });

  it('keeps the last 100 runs of a schedule, newest first, and deletes them with it', async () => {
    await svc.create(counter());
    for (let i = 0; i < 105; i++) {
      clock.advance(1);
      await svc.trigger('tick');
    }
    const runs = await svc.runs('tick', { limit: 100 });
    expect(runs).toHaveLength(100);
    expect(runs[0]!.scheduled_for > runs[99]!.scheduled_for).toBe(true);
    expect(await svc.runs('tick', { limit: 100, status: 'failed' })).toEqual([]);
    expect(await svc.remove('tick')).toBe("schedule 'tick' deleted");
    expect(await h.store.sql.first('SELECT COUNT(*) AS n FROM schedule_runs')).toEqual({ n: 0 });
  });
});
