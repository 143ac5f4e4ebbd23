import { afterEach, describe, expect, it } from 'vitest';
import { planAction, TRANSITIONS } from '../../../../src/services/sandboxes/lifecycle.js';
import type { SandboxRecord } from '../../../../src/state/sandbox-repository.js';
import { codeOf, fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const events = async (name: string) => (await h.services.logs(name)).map((e) => e.event);

describe('lifecycle table', () => {
  it('lets only archived sandboxes be recovered and never starts an archived one', () => {
    expect(TRANSITIONS.recover.from).toEqual(['archived']);
    expect(TRANSITIONS.start.from).not.toContain('archived');
    expect(TRANSITIONS.archive).toMatchObject({ via: 'archiving', to: 'archived' });
  });

  it('plans delete from archived_at, archive and stop from the last activity', () => {
    const base = { name: 'x', created_at: '2026-01-01T00:00:00.000Z', last_activity_at: null, archived_at: null } as unknown as SandboxRecord;
    const at = (s: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + s * 1000);
    const policy = { auto_stop_after_seconds: 60, auto_archive_after_seconds: 120, auto_delete_after_seconds: 30 };
    expect(planAction({ ...base, status: 'running', lifecycle: policy }, at(59))).toBeNull();
    expect(planAction({ ...base, status: 'running', lifecycle: policy }, at(60))).toMatchObject({ action: 'stop', code: 'auto_stop_after_seconds' });
    expect(planAction({ ...base, status: 'stopped', lifecycle: policy }, at(90))).toBeNull();
    expect(planAction({ ...base, status: 'stopped', lifecycle: policy }, at(120))?.action).toBe('archive');
    // Delete counts from the archive, not from creation, and only for archived sandboxes.
    expect(planAction({ ...base, status: 'running', lifecycle: { auto_delete_after_seconds: 1 } }, at(1000))).toBeNull();
    const archived = { ...base, status: 'archived' as const, lifecycle: policy, archived_at: at(500).toISOString() };
    expect(planAction(archived, at(529))).toBeNull();
    expect(planAction(archived, at(530))).toMatchObject({ action: 'delete', reason: 'archived for 30s (auto_delete_after_seconds: 30)' });
    // Activity resets the idle time.
    expect(planAction({ ...base, status: 'running', lifecycle: policy, last_activity_at: at(100).toISOString() }, at(130))).toBeNull();
  });
});

describe('LifecycleService', () => {
  it('archives, refuses start and exec while archived, recovers and starts with the files', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    await h.services.files.write('a', '/workspace/f.txt', 'kept');
    const archived = await h.services.lifecycle.archive('a', 'test');
    expect(archived).toMatchObject({ status: 'archived', archived_reason: 'test' });
    expect(archived.archived_at).toBeDefined();
    expect(h.backend.instances.size).toBe(0);
    expect(await codeOf(h.services.sandboxes.start('a'))).toBe('CONFLICT');
    expect(await codeOf(h.services.files.read('a', '/workspace/f.txt'))).toBe('CONFLICT');
    expect(await codeOf(h.services.lifecycle.archive('a', 'again'))).toBe('CONFLICT');
    const recovered = await h.services.lifecycle.recover('a');
    expect(recovered.status).toBe('stopped');
    expect(recovered.archived_at).toBeUndefined();
    expect(await codeOf(h.services.lifecycle.recover('a'))).toBe('CONFLICT');
    expect((await h.services.sandboxes.start('a')).status).toBe('running');
    expect((await h.services.files.read('a', '/workspace/f.txt')).content).toBe('kept');
    expect(await events('a')).toEqual(expect.arrayContaining(['sandbox_archived', 'sandbox_recovered', 'sandbox_started']));
    await h.services.sandboxes.remove('a');
    expect(h.backend.savedImages.size).toBe(0);
  });

  it('answers NOT_FOUND for unknown sandboxes and UNSUPPORTED where the backend cannot', async () => {
    h = await fakeHarness();
    expect(await codeOf(h.services.lifecycle.recover('nope'))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.lifecycle.resize('nope', { vcpus: 1 }))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.lifecycle.extend('nope'))).toBe('NOT_FOUND');
    await h.services.sandboxes.create({ name: 'a' });
    h.backend.omit('snapshots', 'archive', 'resize');
    expect(await codeOf(h.services.lifecycle.resize('a', { vcpus: 1 }))).toBe('UNSUPPORTED');
    expect(await codeOf(h.services.lifecycle.archive('a', 'x'))).toBe('UNSUPPORTED');
  });

  it('resizes a running sandbox in place and a stopped one for its next start; refuses too much', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    const resized = await h.services.lifecycle.resize('a', { memory_mb: 1024 });
    expect(resized).toMatchObject({ vcpus: 1, memory_mb: 1024, status: 'running' });
    expect([...h.backend.instances.values()][0]!.spec.memory_mb).toBe(1024);
    await h.services.sandboxes.stop('a');
    expect(await h.services.lifecycle.resize('a', { vcpus: 1, memory_mb: 256 })).toMatchObject({ memory_mb: 256, status: 'stopped' });
    expect(await codeOf(h.services.lifecycle.resize('a', { vcpus: 100_000 }))).toBe('BAD_REQUEST');
    await h.services.lifecycle.archive('a', 'x');
    expect(await codeOf(h.services.lifecycle.resize('a', { vcpus: 1 }))).toBe('CONFLICT');
    expect((await events('a')).filter((e) => e === 'sandbox_resized')).toHaveLength(2);
  });

  it('extends from max(expires_at, now) and gc removes what expired, moving a clock', async () => {
    const time = manualClock();
    h = await fakeHarness({}, time.clock);
    await h.services.sandboxes.create({ name: 'short', ttl: '30m' });
    await h.services.sandboxes.create({ name: 'forever' });
    expect((await h.services.sandboxes.get('short')).expires_at).toBe('2026-01-01T00:30:00.000Z');
    expect(await h.services.lifecycle.extend('short', '2h')).toEqual({ expires_at: '2026-01-01T02:30:00.000Z' });
    // No expiry: extend schedules no removal.
    expect(await h.services.lifecycle.extend('forever')).toEqual({ expires_at: null });
    expect((await h.services.sandboxes.get('forever')).expires_at).toBeUndefined();
    expect(await codeOf(h.services.lifecycle.extend('short', '2 hours'))).toBe('BAD_REQUEST');
    expect(await codeOf(h.services.lifecycle.extend('forever', '2 hours'))).toBe('BAD_REQUEST');

    time.advance(3600);
    expect(await h.services.lifecycle.gc()).toEqual({ removed: [], count: 0 });
    time.advance(2 * 3600);
    // Past the expiry: the extension counts from now.
    expect(await h.services.lifecycle.extend('short', '1d')).toEqual({ expires_at: '2026-01-02T03:00:00.000Z' });
    time.advance(86_400);
    expect(await h.services.lifecycle.gc()).toEqual({ removed: ['short'], count: 1 });
    expect(await h.services.lifecycle.gc()).toEqual({ removed: [], count: 0 });
    // 'forever' never got an expiry: it stays.
    expect(h.backend.instances.size).toBe(1);
  });

  it('reconciles policies by the clock: a dry run changes nothing, then stop, archive and delete apply', async () => {
    const time = manualClock();
    h = await fakeHarness({}, time.clock);
    await h.services.sandboxes.create({ name: 'stopper', lifecycle: { auto_stop_after_seconds: 60 } });
    await h.services.sandboxes.create({ name: 'archiver', lifecycle: { auto_archive_after_seconds: 120, auto_delete_after_seconds: 300 } });
    await h.services.sandboxes.create({ name: 'busy', lifecycle: { auto_stop_after_seconds: 60 } });
    await h.services.sandboxes.create({ name: 'no-policy' });

    time.advance(59);
    expect((await h.services.lifecycle.reconcile()).actions).toEqual([]);
    time.advance(1);
    await h.services.exec.exec('busy', { command: ['true'] });
    const preview = await h.services.lifecycle.reconcile(true);
    expect(preview).toEqual({
      dry_run: true,
      actions: [{ sandbox: 'stopper', action: 'stop', reason: 'idle for 60s (auto_stop_after_seconds: 60)' }],
      stopped: [],
      archived: [],
      removed: [],
    });
    expect((await h.services.sandboxes.get('stopper')).status).toBe('running');

    expect(await h.services.lifecycle.reconcile()).toMatchObject({ dry_run: false, stopped: ['stopper'], archived: [], removed: [] });
    expect((await h.services.sandboxes.get('stopper')).status).toBe('stopped');

    time.advance(60);
    const second = await h.services.lifecycle.reconcile();
    expect(second).toMatchObject({ stopped: ['busy'], archived: ['archiver'], removed: [] });
    const archived = await h.services.sandboxes.get('archiver');
    expect(archived).toMatchObject({ status: 'archived', archived_reason: 'lifecycle policy: idle for 120s (auto_archive_after_seconds: 120)' });

    time.advance(299);
    expect((await h.services.lifecycle.reconcile()).removed).toEqual([]);
    time.advance(1);
    expect((await h.services.lifecycle.reconcile()).removed).toEqual(['archiver']);
    expect((await h.services.sandboxes.list()).map((s) => s.name)).toEqual(['busy', 'no-policy', 'stopper']);
  });
});
