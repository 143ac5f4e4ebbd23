import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const inject = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) => {
  const response = await h.app.inject({ method, url, ...(payload ? { payload } : {}) });
  return { status: response.statusCode, body: response.json() as any };
};

describe('PATCH /sandboxes/{name}: expiry', () => {
  it('sets an expiry with ttl, clears it with expires_at: null, and gc then leaves the sandbox', async () => {
    const time = manualClock();
    h = await fakeHarness({}, time.clock);
    await inject('POST', '/sandboxes', { name: 'p' });
    const set = await inject('PATCH', '/sandboxes/p', { ttl: '2h' });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ name: 'p', expires_at: '2026-01-01T02:00:00.000Z' });
    const cleared = await inject('PATCH', '/sandboxes/p', { expires_at: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.data.expires_at).toBeUndefined();
    time.advance(3 * 3600);
    expect(await h.services.lifecycle.gc()).toEqual({ removed: [], count: 0 });
    // extend on a sandbox without an expiry leaves it without one.
    expect((await inject('POST', '/sandboxes/p/extend', { by: '1h' })).body.data).toEqual({ expires_at: null });
    expect((await inject('GET', '/sandboxes/p')).body.data.expires_at).toBeUndefined();
  });

  it('refuses an expiry it cannot set, naming the field', async () => {
    h = await fakeHarness();
    await inject('POST', '/sandboxes', { name: 'p' });
    for (const [body, words] of [
      [{ ttl: '2 hours' }, 'ttl:'],
      [{ expires_at: '2030-01-01T00:00:00Z' }, 'expires_at:'],
      [{ ttl: '1h', expires_at: null }, 'not both'],
    ] as const) {
      const refused = await inject('PATCH', '/sandboxes/p', body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error).toContain(words);
    }
  });
});

describe('list items and PATCH answers', () => {
  it('carry image, labels and description', async () => {
    h = await fakeHarness();
    await inject('POST', '/sandboxes', { name: 'l', labels: { team: 'red' }, description: 'mine' });
    const [item] = (await inject('GET', '/sandboxes')).body.data;
    expect(item).toMatchObject({ name: 'l', image: 'sandboxd/base:bookworm', labels: { team: 'red' }, description: 'mine' });
    const patched = (await inject('PATCH', '/sandboxes/l', { labels: { team: 'blue' } })).body.data;
    expect(patched).toMatchObject({ name: 'l', image: 'sandboxd/base:bookworm', labels: { team: 'blue' }, description: 'mine', vcpus: 1 });
  });

  it('filters by status, and refuses an unknown query parameter on every route', async () => {
    h = await fakeHarness();
    await inject('POST', '/sandboxes', { name: 'up' });
    await inject('POST', '/sandboxes', { name: 'down' });
    await inject('POST', '/sandboxes/down/stop');
    expect((await inject('GET', '/sandboxes?status=stopped')).body.data.map((s: any) => s.name)).toEqual(['down']);
    expect((await inject('GET', '/sandboxes?status=running&status=stopped')).body.data).toHaveLength(2);
    const badStatus = await inject('GET', '/sandboxes?status=asleep');
    expect(badStatus.status).toBe(400);
    expect(badStatus.body.error).toContain('status');
    for (const url of ['/sandboxes?colour=red', '/sandboxes/up?colour=red', '/sandboxes/up/logs?colour=red', '/status?colour=red']) {
      const refused = await inject('GET', url);
      expect(refused.status, url).toBe(400);
      expect(refused.body.error, url).toContain("unknown field 'colour'");
    }
  });
});
