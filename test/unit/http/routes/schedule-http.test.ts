import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

let h: FakeHarness;
const clock = manualClock('2026-01-01T00:00:00.000Z');

beforeAll(async () => {
  h = await fakeHarness({}, clock.clock);
  await h.services.sandboxes.create({ name: 'box' });
});
afterAll(async () => h.close());

const send = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  h.app.inject({ method, url, ...(payload === undefined ? {} : { payload: payload as object }) });

/** The status, code and message a request is answered with. */
async function answer(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const res = await send(method, url, payload);
  const body = res.json();
  return { status: res.statusCode, code: body.code, error: body.error, data: body.data };
}

const exec = (over: Record<string, unknown> = {}) => ({
  name: 'nightly',
  method: 'exec',
  target_sandbox: 'box',
  args: { command: ['echo', 'hi'] },
  cron: '0 3 * * *',
  ...over,
});

describe('schedule routes', () => {
  it('creates, reads by id, name and the status alias, lists, patches, triggers and deletes', async () => {
    const created = await answer('POST', '/schedules', exec());
    expect(created.status).toBe(201);
    expect(created.data).toMatchObject({
      name: 'nightly',
      cron: '0 3 * * *',
      fire_at: null,
      timezone: 'UTC',
      method: 'exec',
      args: { command: ['echo', 'hi'] },
      target_class: null,
      target_object_id: null,
      target_orchestration: null,
      target_sandbox: 'box',
      status: 'active',
      overlap: 'skip',
      misfire: 'fire_once',
      end_at: null,
      next_fire_at: '2026-01-01T03:00:00.000Z',
      last_fired_at: null,
      last_run_status: null,
      fire_count: 0,
      trigger_count: 0,
    });
    const id = created.data.id as string;
    for (const path of [`/schedules/${id}`, '/schedules/nightly', '/schedules/nightly/status']) {
      expect((await answer('GET', path)).data.id).toBe(id);
    }
    expect((await answer('GET', '/schedules')).data.map((s: { name: string }) => s.name)).toEqual(['nightly']);
    expect((await answer('GET', '/schedules?status=paused')).data).toEqual([]);
    expect((await answer('PATCH', '/schedules/nightly', { status: 'paused' })).data).toMatchObject({ status: 'paused', next_fire_at: null });
    expect((await answer('PATCH', '/schedules/nightly', { status: 'active', cron: '@hourly', timezone: 'Asia/Tokyo' })).data).toMatchObject({
      status: 'active',
      cron: '@hourly',
      next_fire_at: '2026-01-01T01:00:00.000Z',
    });
    const run = await answer('POST', '/schedules/nightly/trigger');
    expect(run.status).toBe(200);
    expect(run.data).toMatchObject({ schedule_id: id, status: 'succeeded', missed_count: 0, result: { exit_code: 0 }, error: null });
    expect((await answer('GET', '/schedules/nightly/runs?limit=1')).data).toHaveLength(1);
    expect((await answer('GET', '/schedules/nightly/runs?status=failed')).data).toEqual([]);
    expect((await answer('DELETE', `/schedules/${id}`)).data).toBe("schedule 'nightly' deleted");
    expect((await answer('GET', '/schedules/nightly')).status).toBe(404);
  });

  it('accepts a fire_at up to 60 s in the past (due at once), a 6-field cron, nicknames and a run target', async () => {
    const recent = await answer('POST', '/schedules', { name: 'soon', method: 'run', args: { command: ['true'] }, fire_at: '2025-12-31T23:59:30Z' });
    expect(recent.status).toBe(201);
    expect(recent.data.next_fire_at).toBe('2025-12-31T23:59:30.000Z');
    expect((await answer('POST', '/schedules', exec({ name: 'secs', cron: '*/10 * * * * *' }))).data.next_fire_at).toBe('2026-01-01T00:00:10.000Z');
    expect((await answer('POST', '/schedules', exec({ name: 'weekly', cron: '@weekly' }))).status).toBe(201);
    expect((await answer('POST', '/schedules', exec({ name: 'offset', fire_at: '2026-01-01T02:00:00+01:00', cron: undefined }))).data.fire_at).toBe(
      '2026-01-01T01:00:00.000Z',
    );
    for (const name of ['soon', 'secs', 'weekly', 'offset']) await send('DELETE', `/schedules/${name}`);
  });

  it.each([
    ['a bad name', exec({ name: 'Bad Name' }), 400, /^name: must match/],
    ['a name too long', exec({ name: 'a'.repeat(64) }), 400, /^name: /],
    ['a cron that never fires', exec({ cron: '0 0 30 2 *' }), 400, /^cron: never fires$/],
    ['a 7-field cron', exec({ cron: '0 0 3 * * * 2027' }), 400, /^cron: has 7 fields; give 5/],
    ['a 4-field cron', exec({ cron: '0 3 * *' }), 400, /^cron: has 4 fields/],
    ['an unknown nickname', exec({ cron: '@reboot' }), 400, /^cron: '@reboot' is not a nickname/],
    ['a malformed cron', exec({ cron: '61 * * * *' }), 400, /^cron: /],
    ['a bad time zone', exec({ timezone: 'Mars/Olympus' }), 400, /^timezone: 'Mars\/Olympus' is not an IANA time zone/],
    ['an offset as time zone', exec({ timezone: '+01:00' }), 400, /^timezone: /],
    ['both cron and fire_at', exec({ fire_at: '2026-01-02T00:00:00Z' }), 400, /^cron: give cron or fire_at, not both$/],
    ['neither cron nor fire_at', exec({ cron: undefined }), 400, /^cron: give cron or fire_at$/],
    ['fire_at over 60 s in the past', exec({ cron: undefined, fire_at: '2025-12-31T23:58:59Z' }), 400, /^fire_at: is in the past$/],
    ['fire_at not RFC 3339', exec({ cron: undefined, fire_at: 'tomorrow' }), 400, /^fire_at: 'tomorrow' is not an RFC 3339 timestamp/],
    ['fire_at on February 30', exec({ cron: undefined, fire_at: '2026-02-30T00:00:00Z' }), 400, /^fire_at: /],
    ['end_at in the past', exec({ end_at: '2025-12-01T00:00:00Z' }), 400, /^end_at: is in the past$/],
    ['end_at before the first occurrence', exec({ end_at: '2026-01-01T02:00:00Z' }), 400, /^end_at: the cron's first occurrence/],
    ['end_at with fire_at', exec({ cron: undefined, fire_at: '2026-01-02T00:00:00Z', end_at: '2026-01-03T00:00:00Z' }), 400, /^end_at: applies to cron schedules only$/],
    ['exec method without a sandbox', exec({ target_sandbox: undefined }), 400, /^method: must be 'run' without a target/],
    ['run method with a sandbox', exec({ method: 'run' }), 400, /^method: must be 'exec' with target_sandbox, not 'run'$/],
    ['an orchestration method other than start', exec({ target_sandbox: undefined, target_orchestration: 'flow', method: 'go' }), 400, /^method: must be 'start'/],
    ['two targets', exec({ target_class: 'Counter', target_object_id: 'c1' }), 400, /^target_sandbox: a schedule has one target/],
    ['a class without an object id', exec({ target_sandbox: undefined, target_class: 'Counter', method: 'bump' }), 400, /^target_object_id: is required with target_class$/],
    ['a private method', exec({ target_sandbox: undefined, target_class: 'Counter', target_object_id: 'c1', method: '_secret' }), 400, /^method: must match/],
    ['the reserved class name', exec({ target_sandbox: undefined, target_class: 'classes', target_object_id: 'c1', method: 'bump' }), 400, /^target_class: 'classes' is reserved/],
    ['args that are no exec body', exec({ args: { cmd: 'ls' } }), 400, /^args\.command: is required; args: unknown field 'cmd' \(args must be an exec body\)$/],
    ['args with a bad timeout', exec({ args: { command: ['ls'], timeout_ms: 0 } }), 400, /^args\.timeout_ms: /],
    ['args that are no object', exec({ args: [1] }), 400, /^args: must be a JSON object/],
    ['sudo while it is disabled', exec({ args: { command: ['id'], sudo: true } }), 403, /sudo exec is disabled/],
    ['an unknown field', exec({ every: '5m' }), 400, /unknown field 'every'/],
    ['a bad overlap', exec({ overlap: 'queue' }), 400, /^overlap: /],
    ['an unknown sandbox', exec({ target_sandbox: 'nowhere' }), 404, /nowhere/],
    [
      'an unknown class',
      exec({ target_sandbox: undefined, target_class: 'Counter', target_object_id: 'c1', method: 'bump' }),
      404,
      /^class 'Counter' is not registered: register it first with POST \/objects\/classes$/,
    ],
    ['an unknown definition', exec({ target_sandbox: undefined, target_orchestration: 'flow', method: 'start' }), 404, /^orchestration definition 'flow' not found$/],
  ])('refuses %s', async (_what, body, status, message) => {
    const res = await answer('POST', '/schedules', body);
    expect(res.status).toBe(status);
    expect(res.error).toMatch(message);
    expect((await answer('GET', '/schedules')).data).toEqual([]);
  });

  it('refuses a duplicate name with 409, bad PATCHes with 400 or 409, and unknown schedules with 404', async () => {
    expect((await answer('POST', '/schedules', exec())).status).toBe(201);
    expect(await answer('POST', '/schedules', exec())).toMatchObject({ status: 409, error: "schedule 'nightly' exists already" });
    const patches: [unknown, number, RegExp][] = [
      [{ cron: '* * * * *', fire_at: '2026-01-02T00:00:00Z' }, 400, /^cron: give cron or fire_at, not both$/],
      [{ status: 'completed' }, 400, /^status: /],
      [{ cron: '0 0 31 2 *' }, 400, /^cron: never fires$/],
      [{ timezone: 'Nowhere/City' }, 400, /^timezone: /],
      [{ fire_at: '2020-01-01T00:00:00Z' }, 400, /^fire_at: is in the past$/],
      [{ end_at: 'soon' }, 400, /^end_at: /],
      [{ args: { command: [] } }, 400, /^args\.command: /],
      [{ method: 'run' }, 400, /unknown field 'method'/],
      ['not an object', 400, /body/],
    ];
    for (const [patch, status, message] of patches) {
      const res = await answer('PATCH', '/schedules/nightly', patch);
      expect(res.status, JSON.stringify(patch)).toBe(status);
      expect(res.error).toMatch(message);
    }
    // Nothing changed.
    expect((await answer('GET', '/schedules/nightly')).data).toMatchObject({ cron: '0 3 * * *', status: 'active', args: { command: ['echo', 'hi'] } });
    // A one-shot that completed fires no more: PATCH is a conflict.
    const once = await answer('POST', '/schedules', exec({ name: 'once', cron: undefined, fire_at: '2026-01-01T00:00:00Z' }));
    expect(once.status).toBe(201);
    await h.services.timers.tick();
    await h.services.schedules.settled();
    expect((await answer('GET', '/schedules/once')).data.status).toBe('completed');
    expect(await answer('PATCH', '/schedules/once', { status: 'active' })).toMatchObject({ status: 409, error: expect.stringContaining("schedule 'once' is completed") });
    for (const [method, path] of [
      ['POST', '/schedules/ghost/trigger'],
      ['GET', '/schedules/ghost'],
      ['GET', '/schedules/ghost/status'],
      ['GET', '/schedules/ghost/runs'],
      ['PATCH', '/schedules/ghost'],
      ['DELETE', '/schedules/ghost'],
    ] as const) {
      expect(await answer(method, path, method === 'PATCH' ? { status: 'paused' } : undefined)).toMatchObject({ status: 404, error: "schedule 'ghost' not found" });
    }
    expect((await answer('GET', '/schedules?limit=0')).status).toBe(400);
    expect((await answer('GET', '/schedules/nightly/runs?limit=101')).status).toBe(400);
    expect((await answer('GET', '/schedules/nightly/runs?status=done')).status).toBe(400);
    await send('DELETE', '/schedules/once');
    await send('DELETE', '/schedules/nightly');
  });

  it('documents every schedule route in the OpenAPI document', async () => {
    const doc = (await send('GET', '/openapi.json')).json();
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/schedules'))).toEqual([
      '/schedules',
      '/schedules/{id}',
      '/schedules/{id}/status',
      '/schedules/{id}/trigger',
      '/schedules/{id}/runs',
    ]);
    expect(Object.keys(doc.paths['/schedules/{id}'])).toEqual(['get', 'patch', 'delete']);
  });
});
