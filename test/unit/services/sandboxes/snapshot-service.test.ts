import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../src/errors.js';
import { codeOf, fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

describe('SnapshotService', () => {
  it('snapshots a sandbox with its settings and restores it twice with the same files', async () => {
    h = await fakeHarness({ snapshotPrefix: 'my-snaps' });
    await h.services.sandboxes.create({ name: 'src', vcpus: 1, memory_mb: 256, profile: 'restrictive' });
    await h.services.files.write('src', '/workspace/a.txt', 'hello');
    const snap = await h.services.snapshots.create({ sandbox: 'src', name: 'snap1' });
    expect(snap).toMatchObject({ name: 'snap1', sandbox: 'src', image_tag: `my-snaps/${h.store.deploymentId}:snap1`, backend: 'fake', base_image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 256, profile: 'restrictive' });
    await h.services.files.write('src', '/workspace/a.txt', 'changed later');

    const first = await h.services.snapshots.restore('snap1');
    expect(first).toMatchObject({ name: 'src-restored', status: 'running', memory_mb: 256, profile: 'restrictive', image: 'sandboxd/base:bookworm' });
    const second = await h.services.snapshots.restore('snap1', 'copy2');
    expect(second.name).toBe('copy2');
    for (const name of ['src-restored', 'copy2']) expect((await h.services.files.read(name, '/workspace/a.txt')).content).toBe('hello');

    expect(await h.services.snapshots.list()).toHaveLength(1);
    expect(await h.services.snapshots.get('snap1')).toEqual(snap);
    const srcEvents = (await h.services.logs('src')).map((e) => e.event);
    expect(srcEvents).toContain('snapshot_created');
    expect((await h.services.logs('copy2')).map((e) => e.event).slice(0, 2)).toEqual(['sandbox_created', 'snapshot_restored']);

    expect(await h.services.snapshots.delete('snap1')).toBe("snapshot 'snap1' deleted");
    expect(h.backend.savedImages.has('my-snaps:snap1')).toBe(false);
    expect((await h.services.logs('src')).map((e) => e.event)).toContain('snapshot_deleted');
    expect(await codeOf(h.services.snapshots.get('snap1'))).toBe('NOT_FOUND');
  });

  it('restores the labels and description the sandbox had at the snapshot, and records the origin', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'labelled', labels: { team: 'red' }, description: 'the original' });
    await h.services.snapshots.create({ sandbox: 'labelled', name: 'with-labels' });
    // Later changes to the source do not reach the snapshot.
    await h.services.sandboxes.update('labelled', { labels: { team: 'blue' } });
    const restored = await h.services.snapshots.restore('with-labels', 'relabelled');
    expect(restored).toMatchObject({ name: 'relabelled', labels: { team: 'red' }, description: 'the original', restored_from: 'with-labels' });
    expect(await h.services.sandboxes.get('relabelled')).toMatchObject({ labels: { team: 'red' }, restored_from: 'with-labels' });
    expect((await h.services.sandboxes.get('labelled')).restored_from).toBeUndefined();
  });

  it('refuses duplicates, unknowns, archived sources, taken restore names and the sandbox limit', async () => {
    h = await fakeHarness({ maxSandboxes: 2 });
    await h.services.sandboxes.create({ name: 'src' });
    await h.services.snapshots.create({ sandbox: 'src', name: 's' });
    expect(await codeOf(h.services.snapshots.create({ sandbox: 'src', name: 's' }))).toBe('CONFLICT');
    expect(await codeOf(h.services.snapshots.create({ sandbox: 'nope', name: 't' }))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.snapshots.restore('nope'))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.snapshots.delete('nope'))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.snapshots.restore('s', 'src'))).toBe('CONFLICT');
    await h.services.snapshots.restore('s', 'one');
    expect(await codeOf(h.services.snapshots.restore('s', 'two'))).toBe('LIMIT_REACHED');
    await h.services.sandboxes.remove('one');
    await h.services.lifecycle.archive('src', 'x');
    expect(await codeOf(h.services.snapshots.create({ sandbox: 'src', name: 't' }))).toBe('CONFLICT');
    // A long source name makes a default restore name that is no valid name.
    await h.services.sandboxes.remove('src');
    const long = 'x'.repeat(60);
    await h.services.sandboxes.create({ name: long });
    await h.services.snapshots.create({ sandbox: long, name: 'l' });
    expect(await codeOf(h.services.snapshots.restore('l'))).toBe('BAD_REQUEST');
  });

  it('leaves nothing behind when the backend fails a snapshot, and says UNSUPPORTED without the capability', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'src' });
    h.backend.failNext('snapshot', new ServiceError('INTERNAL', 'disk full'));
    expect(await codeOf(h.services.snapshots.create({ sandbox: 'src', name: 's' }))).toBe('INTERNAL');
    expect(await h.services.snapshots.list()).toEqual([]);
    expect(h.backend.savedImages.size).toBe(0);
    h.backend.omit('snapshots', 'archive', 'resize');
    expect(await codeOf(h.services.snapshots.create({ sandbox: 'src', name: 's' }))).toBe('UNSUPPORTED');
  });

  it('recovery removes half-made snapshots and images nothing refers to', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'src' });
    await h.services.snapshots.create({ sandbox: 'src', name: 'keep' });
    await h.store.db
      .insertInto('snapshots')
      .values({ name: 'half', status: 'creating', sandbox: 'src', sandbox_uuid: 'u', image_tag: 'sandboxd-snapshot:half', backend: 'fake', base_image: 'b', vcpus: 1, memory_mb: 512, profile: 'moderate', env: '{}', created_at: new Date().toISOString(), labels: '{}', description: null })
      .execute();
    h.backend.savedImages.set('sandboxd-snapshot:half', { kind: 'snapshot', files: new Map() });
    h.backend.savedImages.set('sandboxd-snapshot:stray', { kind: 'snapshot', files: new Map() });
    const report = await h.services.recovery.reconcile();
    expect(report.imagesRemoved).toBe(2);
    expect([...h.backend.savedImages.keys()]).toEqual([`sandboxd-snapshot/${h.store.deploymentId}:keep`]);
    expect((await h.services.snapshots.list()).map((s) => s.name)).toEqual(['keep']);
  });

  it('recovery finishes an archive whose container is gone and rolls back one whose container remains', async () => {
    h = await fakeHarness();
    const done = await h.services.sandboxes.create({ name: 'done' });
    const undone = await h.services.sandboxes.create({ name: 'undone' });
    // As a crash would leave them: both marked archiving; one container already archived and removed.
    const [doneId] = [...h.backend.instances.entries()].find(([, i]) => i.spec.uuid === done.uuid)!;
    await h.backend.archive(doneId, `sandboxd-archive:${done.uuid}`);
    await h.store.db.updateTable('sandboxes').set({ status: 'archiving' }).execute();
    await h.services.recovery.reconcile();
    expect(await h.services.sandboxes.get('done')).toMatchObject({ status: 'archived', archived_reason: 'archive finished after a restart' });
    expect((await h.services.sandboxes.get('undone')).status).toBe('running');
    expect(h.backend.savedImages.has(`sandboxd-archive:${done.uuid}`)).toBe(true);
    expect(undone.status).toBe('running');
  });
});
