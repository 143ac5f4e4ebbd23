import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_REMOVING } from '../../../../src/services/support/departures.js';
import type { FakeBackend } from '../../../../src/backends/fake/fake-backend.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

/**
 * A DELETE answers once the record is gone; the engine removes the container afterwards
 * (Departures). What must follow the container, not the record, is checked while a removal
 * is held: the packet filter's rules, a volume's delete, the server's close.
 */
let h: FakeHarness | undefined;
afterEach(async () => {
  held?.release();
  await h?.close();
  h = undefined;
  held = undefined;
});

let held: { release(): void; readonly waiting: number } | undefined;

/** Holds every engine removal until `release`. */
function holdRemovals(backend: FakeBackend): NonNullable<typeof held> {
  const waiting: (() => void)[] = [];
  const remove = backend.remove.bind(backend);
  backend.remove = async (id) => {
    await new Promise<void>((resolve) => waiting.push(resolve));
    await remove(id);
  };
  held = {
    release: () => waiting.splice(0).forEach((resolve) => resolve()),
    get waiting() {
      return waiting.length;
    },
  };
  return held;
}

const settled = async (promise: Promise<unknown>) => Promise.race([promise.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 50))]);

describe('removing a sandbox in the background', () => {
  it('answers before the engine removed the container, frees the name at once, and removes the container after', async () => {
    h = await fakeHarness();
    const first = (await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'box' } })).json().data;
    const removals = holdRemovals(h.backend);
    const deleted = await h.app.inject({ method: 'DELETE', url: '/sandboxes/box' });
    expect(deleted.statusCode).toBe(200);
    expect(removals.waiting).toBe(1);
    expect(h.backend.instances.size).toBe(1);
    expect((await h.app.inject({ url: '/sandboxes' })).json().data).toEqual([]);
    expect((await h.app.inject({ url: '/sandboxes/box' })).statusCode).toBe(404);

    const again = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'box' } });
    expect(again.statusCode).toBe(201);
    expect(again.json().data.uuid).not.toBe(first.uuid);
    expect(h.backend.instances.size).toBe(2);

    removals.release();
    await h.services.departures.settled();
    expect([...h.backend.instances.values()].map((instance) => instance.spec.uuid)).toEqual([again.json().data.uuid]);
    expect(h.services.departures.size).toBe(0);
  });

  it(`removes at most ${MAX_REMOVING} containers at once, however many DELETEs answered`, async () => {
    h = await fakeHarness();
    for (let i = 0; i < MAX_REMOVING + 2; i++) await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: `many-${i}` } });
    const removals = holdRemovals(h.backend);
    for (let i = 0; i < MAX_REMOVING + 2; i++) expect((await h.app.inject({ method: 'DELETE', url: `/sandboxes/many-${i}` })).statusCode).toBe(200);
    await new Promise((resolve) => setImmediate(resolve));
    expect(removals.waiting).toBe(MAX_REMOVING);
    expect(h.services.departures.size).toBe(MAX_REMOVING + 2);
    removals.release();
    await vi.waitFor(() => expect(removals.waiting).toBe(2));
    removals.release();
    await h.services.departures.settled();
    expect(h.backend.instances.size).toBe(0);
  });

  it("keeps a departing container's packet-filter rules until it is gone, through other sandboxes' syncs", async () => {
    h = await fakeHarness();
    const post = (name: string, deny: string) => h!.app.inject({ method: 'POST', url: '/sandboxes', payload: { name, network: { egress: 'open', deny: [deny] } } });
    await post('leaving', '192.0.2.9');
    const leavingId = (await h.services.sandboxes.require('leaving')).backend_id;
    const removals = holdRemovals(h.backend);
    expect((await h.app.inject({ method: 'DELETE', url: '/sandboxes/leaving' })).statusCode).toBe(200);
    // Another sandbox's create pushes the rules anew: the departing container's stay.
    await post('staying', '192.0.2.10');
    const stayingId = (await h.services.sandboxes.require('staying')).backend_id;
    expect(h.backend.egressState.rules.map((rule) => rule.id).sort()).toEqual([leavingId, stayingId].sort());

    removals.release();
    await h.services.departures.settled();
    expect(h.backend.egressState.rules).toEqual([{ id: stayingId, allow: [], deny: ['192.0.2.10/32'] }]);
  });

  it('makes a volume delete wait for a departing container that mounts it, then deletes it', async () => {
    h = await fakeHarness();
    expect((await h.app.inject({ method: 'POST', url: '/volumes', payload: { name: 'data' } })).statusCode).toBe(201);
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'user', volumes: [{ name: 'data', path: '/data' }] } });
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'other' } });
    const removals = holdRemovals(h.backend);
    await h.app.inject({ method: 'DELETE', url: '/sandboxes/user' });
    await h.app.inject({ method: 'DELETE', url: '/sandboxes/other' });
    expect(removals.waiting).toBe(2);

    const volumeDelete = h.app.inject({ method: 'DELETE', url: '/volumes/data' });
    expect(await settled(volumeDelete)).toBe(false);
    removals.release();
    const answer = await volumeDelete;
    expect(answer.statusCode).toBe(200);
    expect((await h.app.inject({ url: '/volumes' })).json().data).toEqual([]);
  });

  it('leaves a container the engine failed to remove to the orphan sweep, logged; the DELETE still answers 200', async () => {
    h = await fakeHarness();
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'stuck' } });
    h.backend.failNext('remove', new Error('engine says no'));
    expect((await h.app.inject({ method: 'DELETE', url: '/sandboxes/stuck' })).statusCode).toBe(200);
    await h.services.departures.settled();
    expect(h.backend.instances.size).toBe(1);
    expect((await h.services.recovery.reconcile()).orphansRemoved).toBe(1);
    expect(h.backend.instances.size).toBe(0);
  });

  it("waits at close for removals under way, so that a server's stop leaves no container behind", async () => {
    h = await fakeHarness();
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'last' } });
    const removals = holdRemovals(h.backend);
    await h.app.inject({ method: 'DELETE', url: '/sandboxes/last' });
    const closing = h.services.close();
    expect(await settled(closing)).toBe(false);
    removals.release();
    await closing;
    expect(h.backend.instances.size).toBe(0);
  });
});
