import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const post = (url: string, payload?: unknown) =>
  h.app.inject({ method: 'POST', url, ...(payload === undefined ? {} : { payload: payload as object }) });

describe('lifecycle and snapshot routes (fake backend)', () => {
  it('answers with the shapes and statuses of docs/decisions.md', async () => {
    h = await fakeHarness();
    expect((await post('/sandboxes', { name: 'a', ttl: '1h' })).statusCode).toBe(201);

    const snap = await post('/snapshots', { sandbox: 'a', name: 's1' });
    expect(snap.statusCode).toBe(201);
    expect(snap.json().data).toMatchObject({ name: 's1', sandbox: 'a', image_tag: `sandboxd-snapshot/${h.store.deploymentId}:s1` });
    expect((await h.app.inject({ url: '/snapshots' })).json().data).toHaveLength(1);
    expect((await h.app.inject({ url: '/snapshots/s1' })).json().data.name).toBe('s1');

    const restored = await post('/snapshots/s1/restore');
    expect(restored.statusCode).toBe(201);
    expect(restored.json().data).toMatchObject({ name: 'a-restored', status: 'running' });
    expect((await post('/snapshots/s1/restore', { as_name: 'b' })).json().data.name).toBe('b');

    expect((await h.app.inject({ method: 'DELETE', url: '/snapshots/s1' })).json()).toEqual({ success: true, data: "snapshot 's1' deleted" });

    const extended = await post('/sandboxes/a/extend');
    expect(extended.statusCode).toBe(200);
    expect(Object.keys(extended.json().data)).toEqual(['expires_at']);
    expect((await post('/sandboxes/a/extend', { by: '30m' })).statusCode).toBe(200);

    const resized = await post('/sandboxes/a/resize', { memory_mb: 256 });
    expect(resized.statusCode).toBe(200);
    expect(resized.json().data).toMatchObject({ name: 'a', memory_mb: 256 });

    expect((await post('/gc')).json()).toEqual({ success: true, data: { removed: [], count: 0 } });
    expect((await post('/lifecycle/reconcile')).json().data).toEqual({ dry_run: false, actions: [], stopped: [], archived: [], removed: [] });
    expect((await post('/lifecycle/reconcile', { dry_run: true })).json().data.dry_run).toBe(true);

    await h.services.lifecycle.archive('a', 'test');
    expect((await post('/sandboxes/a/start')).statusCode).toBe(409);
    const recovered = await post('/sandboxes/a/recover');
    expect(recovered.statusCode).toBe(200);
    expect(recovered.json().data.status).toBe('stopped');
  });

  it('refuses bad input with 400, unknowns with 404, conflicts with 409', async () => {
    h = await fakeHarness();
    await post('/sandboxes', { name: 'a' });
    await post('/snapshots', { sandbox: 'a', name: 's1' });
    const cases: [string, unknown, number, string][] = [
      ['/sandboxes/a/extend', { by: '2 hours' }, 400, 'by:'],
      ['/sandboxes/a/extend', { by: '0h' }, 400, 'by:'],
      ['/sandboxes/a/extend', { by: 5 }, 400, 'by:'],
      ['/sandboxes/a/extend', { until: '1h' }, 400, "unknown field 'until'"],
      ['/sandboxes/nope/extend', {}, 404, "sandbox 'nope' not found"],
      ['/sandboxes/a/resize', {}, 400, 'give vcpus, memory_mb or both'],
      ['/sandboxes/a/resize', { vcpus: 0 }, 400, 'vcpus:'],
      ['/sandboxes/a/resize', { vcpus: 1.5 }, 400, 'vcpus:'],
      ['/sandboxes/a/resize', { memory_mb: 8 }, 400, 'memory_mb:'],
      ['/sandboxes/a/resize', { memory_mb: '512' }, 400, 'memory_mb:'],
      ['/sandboxes/nope/resize', { vcpus: 1 }, 404, "sandbox 'nope' not found"],
      ['/sandboxes/a/recover', undefined, 409, 'not archived'],
      ['/sandboxes/nope/recover', undefined, 404, "sandbox 'nope' not found"],
      ['/sandboxes/Bad_Name/recover', undefined, 400, 'name:'],
      ['/lifecycle/reconcile', { dry_run: 'yes' }, 400, 'dry_run:'],
      ['/snapshots', { sandbox: 'a', name: 's1' }, 409, "snapshot 's1' already exists"],
      ['/snapshots', { sandbox: 'a', name: 'Bad Name' }, 400, 'name:'],
      ['/snapshots', { sandbox: 'a' }, 400, 'name: is required'],
      ['/snapshots', { sandbox: 'nope', name: 's2' }, 404, "sandbox 'nope' not found"],
      ['/snapshots/nope/restore', {}, 404, "snapshot 'nope' not found"],
      ['/snapshots/s1/restore', { as_name: '-x' }, 400, 'as_name:'],
      ['/snapshots/s1/restore', { as_name: 'a' }, 409, "sandbox 'a' already exists"],
    ];
    for (const [url, body, status, text] of cases) {
      const res = await post(url, body);
      expect(res.statusCode, `${url} ${JSON.stringify(body)}`).toBe(status);
      expect(res.json().error, url).toContain(text);
    }
    expect((await h.app.inject({ url: '/snapshots/nope' })).statusCode).toBe(404);
    expect((await h.app.inject({ method: 'DELETE', url: '/snapshots/nope' })).statusCode).toBe(404);
    expect((await h.app.inject({ url: '/snapshots/NOPE!' })).statusCode).toBe(400);
  });

  it('answers 422 where the backend lacks the capability and 429 for a restore past the limit', async () => {
    h = await fakeHarness({ maxSandboxes: 1 });
    await post('/sandboxes', { name: 'a' });
    await post('/snapshots', { sandbox: 'a', name: 's1' });
    expect((await post('/snapshots/s1/restore')).statusCode).toBe(429);
    h.backend.omit('snapshots', 'archive', 'resize');
    expect((await post('/sandboxes/a/resize', { vcpus: 1 })).statusCode).toBe(422);
    expect((await post('/snapshots', { sandbox: 'a', name: 's2' })).statusCode).toBe(422);
  });
});
