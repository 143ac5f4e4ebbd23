import { afterEach, describe, expect, it } from 'vitest';
import { ServiceError } from '../../../../src/errors.js';
import { execBody } from '../../../../src/schemas/exec-schemas.js';
import { codeOf, fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

describe('SandboxService', () => {
  it('creates a running sandbox with defaults, a UUIDv7 and its settings', async () => {
    h = await fakeHarness();
    const sb = await h.services.sandboxes.create({ name: 'a', labels: { team: 'x' }, description: 'demo', env: { A: '1' } });
    expect(sb).toMatchObject({ name: 'a', status: 'running', backend: 'fake', vcpus: 1, memory_mb: 512, profile: 'moderate', image: 'sandboxd/base:bookworm' });
    expect(sb.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(sb.ip).toBeDefined();
    const [instance] = h.backend.instances.values();
    expect(instance!.spec).toMatchObject({ name: 'a', uuid: sb.uuid, env: { A: '1' }, profile: 'moderate' });
    expect(await h.services.sandboxes.getByUuid(sb.uuid)).toMatchObject({ name: 'a', description: 'demo' });
  });

  it('refuses a duplicate name with CONFLICT and keeps the first', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    expect(await codeOf(h.services.sandboxes.create({ name: 'a' }))).toBe('CONFLICT');
    expect(h.backend.instances.size).toBe(1);
  });

  it('refuses creation past the sandbox limit with LIMIT_REACHED', async () => {
    h = await fakeHarness({ maxSandboxes: 2 });
    await h.services.sandboxes.create({ name: 'a' });
    await h.services.sandboxes.create({ name: 'b' });
    expect(await codeOf(h.services.sandboxes.create({ name: 'c' }))).toBe('LIMIT_REACHED');
    expect((await h.services.stats()).sandbox_limit).toBe(2);
    await h.services.sandboxes.remove('a');
    await h.services.sandboxes.create({ name: 'c' });
  });

  it('rolls back a create that the backend failed, leaving no record', async () => {
    h = await fakeHarness();
    h.backend.failNext('create', new ServiceError('IMAGE_UNAVAILABLE', 'no image'));
    expect(await codeOf(h.services.sandboxes.create({ name: 'a' }))).toBe('IMAGE_UNAVAILABLE');
    expect(await h.services.sandboxes.list()).toEqual([]);
    await h.services.sandboxes.create({ name: 'a' });
  });

  it('filters by labels, ANDed', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a', labels: { team: 'x', env: 'dev' } });
    await h.services.sandboxes.create({ name: 'b', labels: { team: 'x', env: 'prod' } });
    await h.services.sandboxes.create({ name: 'c', labels: { team: 'y' } });
    const names = async (f: string[]) => (await h.services.sandboxes.list(f)).map((s) => s.name);
    expect(await names([])).toEqual(['a', 'b', 'c']);
    expect(await names(['team:x'])).toEqual(['a', 'b']);
    expect(await names(['team:x', 'env:prod'])).toEqual(['b']);
    expect(await names(['team:z'])).toEqual([]);
    expect(await codeOf(h.services.sandboxes.list(['nocolon']))).toBe('BAD_REQUEST');
  });

  it('updates labels (replacing them), description and lifecycle (null clears)', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a', labels: { old: '1' }, lifecycle: { auto_stop_after_seconds: 60 } });
    await h.services.sandboxes.update('a', { labels: { new: '2' }, description: 'd' });
    expect(await h.services.sandboxes.get('a')).toMatchObject({ labels: { new: '2' }, description: 'd', lifecycle: { auto_stop_after_seconds: 60 } });
    await h.services.sandboxes.update('a', { lifecycle: null });
    expect((await h.services.sandboxes.get('a')).lifecycle).toBeUndefined();
  });

  it('stops and starts idempotently, auditing only real transitions', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    expect((await h.services.sandboxes.stop('a')).status).toBe('stopped');
    expect((await h.services.sandboxes.stop('a')).status).toBe('stopped');
    expect((await h.services.sandboxes.start('a')).status).toBe('running');
    expect((await h.services.sandboxes.start('a')).status).toBe('running');
    const events = (await h.services.logs('a')).map((e) => e.event);
    expect(events).toEqual(['sandbox_created', 'sandbox_stopped', 'sandbox_started']);
    expect(await codeOf(h.services.sandboxes.start('ghost'))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.sandboxes.stop('ghost'))).toBe('NOT_FOUND');
  });

  it('reports the status the engine observes and recreates a vanished container on start', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    const [id] = h.backend.instances.keys();
    h.backend.instances.get(id!)!.state.status = 'stopped';
    expect((await h.services.sandboxes.get('a')).status).toBe('stopped');
    expect((await h.services.sandboxes.list())[0]!.status).toBe('stopped');
    h.backend.instances.delete(id!);
    expect((await h.services.sandboxes.start('a')).status).toBe('running');
    expect(h.backend.instances.size).toBe(1);
  });

  it('removes the container and the record', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    expect(await h.services.sandboxes.remove('a')).toBe("sandbox 'a' removed");
    // The record went at once; the container goes in the background.
    await h.services.departures.settled();
    expect(h.backend.instances.size).toBe(0);
    expect(await codeOf(h.services.sandboxes.get('a'))).toBe('NOT_FOUND');
    expect(await codeOf(h.services.sandboxes.remove('a'))).toBe('NOT_FOUND');
  });

  it('serialises lifecycle operations on one sandbox', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    const results = await Promise.allSettled([h.services.sandboxes.stop('a'), h.services.sandboxes.remove('a'), h.services.sandboxes.start('a')]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    await h.services.departures.settled();
    expect(h.backend.instances.size).toBe(0);
  });

  it('sets expires_at from ttl', async () => {
    const now = new Date('2026-01-01T00:00:00.000Z');
    h = await fakeHarness({}, () => now);
    const sb = await h.services.sandboxes.create({ name: 'a', ttl: '2h' });
    expect(sb.expires_at).toBe('2026-01-01T02:00:00.000Z');
  });
});

describe('ExecService', () => {
  it('runs commands, returns exit codes and audits them', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    h.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'out\n' }, { stream: 'stderr', text: 'err\n' }], exit_code: 3 });
    const result = await h.services.exec.exec('a', { command: ['false'] });
    expect(result).toMatchObject({ output: 'out\nerr\n', stdout: 'out\n', stderr: 'err\n', exit_code: 3, timed_out: false });
    const entry = (await h.services.logs('a')).at(-1);
    expect(entry).toMatchObject({ event: 'command_executed', command: ['false'], exit_code: 3 });
  });

  it('passes workdir, env and stdin; sudo runs as root only when allowed', async () => {
    h = await fakeHarness({ allowSudoExec: true });
    await h.services.sandboxes.create({ name: 'a' });
    let seen: unknown;
    h.backend.onExec = (request) => ((seen = request), {});
    await h.services.exec.exec('a', { command: ['id'], workdir: '/tmp', env: { A: '1' }, stdin: 'in', sudo: true, timeout_ms: 5000 });
    expect(seen).toMatchObject({ command: ['id'], workdir: '/tmp', env: { A: '1' }, user: 'root', timeout_ms: 5000, stdin: Buffer.from('in') });
  });

  it('refuses sudo when not allowed, relative workdirs, unknown and stopped sandboxes', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    expect(await codeOf(h.services.exec.exec('a', { command: ['id'], sudo: true }))).toBe('FORBIDDEN');
    // A relative workdir is refused by the schema that every request passes (the service takes parsed input).
    expect(execBody.safeParse({ command: ['id'], workdir: 'tmp' }).success).toBe(false);
    expect(await codeOf(h.services.exec.exec('ghost', { command: ['id'] }))).toBe('NOT_FOUND');
    await h.services.sandboxes.stop('a');
    expect(await codeOf(h.services.exec.exec('a', { command: ['id'] }))).toBe('CONFLICT');
  });

  it('reports a timeout with partial output', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    h.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'partial' }], hang: true });
    const result = await h.services.exec.exec('a', { command: ['sleep', '100'], timeout_ms: 20 });
    expect(result).toMatchObject({ output: 'partial', exit_code: 124, timed_out: true });
  });
});

describe('FileService', () => {
  it('round-trips text and binary, choosing the encoding by content', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    const binary = Buffer.from([0, 1, 2, 255, 254]).toString('base64');
    await h.services.files.write('a', '/workspace/t.txt', 'héllo');
    await h.services.files.write('a', '/workspace/b.bin', binary, 'base64');
    expect(await h.services.files.read('a', '/workspace/t.txt')).toEqual({ content: 'héllo', encoding: 'utf8', size: 6 });
    expect(await h.services.files.read('a', '/workspace/b.bin')).toEqual({ content: binary, encoding: 'base64', size: 5 });
    expect(await h.services.files.delete('a', '/workspace/t.txt')).toBe('deleted /workspace/t.txt');
    expect(await codeOf(h.services.files.read('a', '/workspace/t.txt'))).toBe('NOT_FOUND');
    const events = (await h.services.logs('a')).map((e) => e.event);
    expect(events).toEqual(['sandbox_created', 'file_written', 'file_written', 'file_read', 'file_read', 'file_deleted']);
  });

  it('refuses traversal, NUL bytes, empty paths and bad base64', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    for (const path of ['/workspace/../etc/passwd', '/..', '/a/./../b', '/a\0b', '/', '//']) {
      expect(await codeOf(h.services.files.write('a', path, 'x')), path).toBe('BAD_REQUEST');
    }
    expect(await codeOf(h.services.files.write('a', '/x', '***', 'base64'))).toBe('BAD_REQUEST');
    expect(await codeOf(h.services.files.write('a', '/x', 'QUJD=', 'base64'))).toBe('BAD_REQUEST');
  });

  it('checks every file of a multi-file write before writing any', async () => {
    h = await fakeHarness();
    await h.services.sandboxes.create({ name: 'a' });
    expect(await codeOf(h.services.files.writeMany('a', { 'ok.txt': 'x', '../escape': 'y' }))).toBe('BAD_REQUEST');
    expect([...h.backend.instances.values()][0]!.files.size).toBe(0);
    expect(await h.services.files.writeMany('a', { 'src/a.py': 'print(1)', '/tmp/b': 'b' })).toEqual({ written: 2 });
    expect((await h.services.files.read('a', '/workspace/src/a.py')).content).toBe('print(1)');
  });
});
