import { afterEach, describe, expect, it } from 'vitest';
import { SandboxRepository, type TransitionedStatus } from '../../../../src/state/sandbox-repository.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

describe('RecoveryService', () => {
  it('rolls back unfinished creates and removals, fixes statuses and removes orphans', async () => {
    h = await fakeHarness();
    const repo = new SandboxRepository(h.store.db, h.store.sql);
    const running = await h.services.sandboxes.create({ name: 'running' });
    const stoppedBehind = await h.services.sandboxes.create({ name: 'stopped-behind' });
    const vanished = await h.services.sandboxes.create({ name: 'vanished' });
    const halfCreated = await h.services.sandboxes.create({ name: 'half-created' });
    const halfRemoved = await h.services.sandboxes.create({ name: 'half-removed' });
    const byName = (name: string) => [...h.backend.instances.values()].find((i) => i.spec.name === name)!;

    byName('stopped-behind').state.status = 'stopped';
    h.backend.instances.delete(byName('vanished').state.id);
    // What a crash leaves behind mid-create and mid-remove, written past the transitions table.
    await repo.update(halfCreated.uuid, { status: 'creating' as TransitionedStatus });
    await repo.update(halfRemoved.uuid, { status: 'removing' as TransitionedStatus });
    await h.backend.create({ name: 'orphan', uuid: 'not-in-store', image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 64, profile: 'moderate', env: {} });
    await h.backend.create({ name: 'pool', uuid: 'pool-1', image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 64, profile: 'moderate', env: {}, role: 'pool' });

    const report = await h.services.recovery.reconcile();
    expect(report.rolledBack.sort()).toEqual(['half-created', 'half-removed']);
    expect(report.corrected).toEqual(['stopped-behind']);
    expect(report.lost).toEqual(['vanished']);
    expect(report.orphansRemoved).toBe(2);

    const list = await h.services.sandboxes.list();
    expect(list.map((s) => [s.name, s.status])).toEqual([
      ['running', 'running'],
      ['stopped-behind', 'stopped'],
      // Its container was removed behind the service's back: lost, saying so.
      ['vanished', 'lost'],
    ]);
    expect(list.find((s) => s.name === 'vanished')?.status_reason).toMatch(/was removed outside sandboxd/);
    expect([...h.backend.instances.values()].map((i) => i.spec.name).sort()).toEqual(['running', 'stopped-behind']);
    expect(running.uuid && stoppedBehind.uuid && vanished.uuid).toBeTruthy();
    const started = await h.services.sandboxes.start('vanished');
    expect([started.status, started.recreated]).toEqual(['running', true]);

    const again = await h.services.recovery.reconcile();
    expect(again).toEqual({ corrected: [], rolledBack: [], lost: [], orphansRemoved: 0, imagesRemoved: 0 });
  });

  it("leaves the pool instances of another live replica alone, at start and in the sweep, and removes a gone replica's", async () => {
    h = await fakeHarness({ poolSize: 0 });
    const now = Date.now();
    await h.store.db
      .insertInto('replicas')
      .values([
        { id: 'alive', host: 'h', data_dir: '/a', pid: 1, url: null, started_at: now, heartbeat_at: now },
        { id: 'gone', host: 'h', data_dir: '/b', pid: 2, url: null, started_at: now - 60_000, heartbeat_at: now - 60_000 },
      ])
      .execute();
    const pooled = (uuid: string, replica?: string) =>
      h.backend.create({ name: `pool-${uuid}`, uuid, image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 64, profile: 'moderate', env: {}, role: 'pool', ...(replica ? { replica } : {}) });
    await pooled('of-alive', 'alive');
    await pooled('of-gone', 'gone');
    await pooled('unlabelled');
    const left = () => [...h.backend.instances.values()].map((i) => i.spec.uuid).sort();
    expect((await h.services.recovery.reconcile()).orphansRemoved).toBe(2);
    expect(left()).toEqual(['of-alive']);
    // Old enough for the sweep, which also leaves it alone while its replica lives.
    await pooled('of-gone-later', 'gone');
    for (const instance of h.backend.instances.values()) instance.state.created_at = new Date(now - 3_600_000).toISOString();
    expect(await h.services.recovery.sweep(() => false)).toBe(1);
    expect(left()).toEqual(['of-alive']);
    // The replica is gone now: its instance is an orphan like any other.
    await h.store.db.updateTable('replicas').set({ heartbeat_at: now - 60_000 }).where('id', '=', 'alive').execute();
    expect(await h.services.recovery.sweep(() => false)).toBe(1);
    expect(left()).toEqual([]);
  });
});
