import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { manualClock } from '../helpers/manual-clock.js';

/**
 * The sandbox state table (docs/decisions.md, "Sandboxes"), row by row, on real Docker, with
 * its refusals. Time moves by a manual clock: policies and TTLs are tested without sleeping.
 */
const docker = new Docker();
const time = manualClock(new Date().toISOString());
let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

beforeAll(async () => {
  rt = await dockerRuntime({ gcInterval: 0, reconcileInterval: 0 }, time.clock);
  api = (method, path, body) => call(rt.url, method, path, body);
});
afterAll(async () => rt?.dispose());

const containerOf = async (uuid: string) =>
  (await docker.listContainers({ all: true, filters: { label: [`sandboxd.uuid=${uuid}`, 'sandboxd.role=sandbox'] } }))[0];
const imageExists = (tag: string) => docker.getImage(tag).inspect().then(() => true, () => false);
const exec = async (name: string, script: string) => (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', script] })).body.data;
const events = async (name: string) => ((await api('GET', `/sandboxes/${name}/logs`)).body.data as { event: string }[]).map((e) => e.event);

describe('sandbox state table on Docker', () => {
  it('(none) -> running -> stopped -> running -> removed, exec and extend leave the state unchanged', async () => {
    const name = uniqueName('rows');
    const created = await api('POST', '/sandboxes', { name, ttl: '2h' });
    expect(created.status).toBe(201);
    const uuid = created.body.data.uuid as string;
    expect(created.body.data.expires_at).toBeDefined();
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] })).body.data.exit_code).toBe(0);
    expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('running');

    const extended = await api('POST', `/sandboxes/${name}/extend`, { by: '30m' });
    expect(extended.status).toBe(200);
    expect(Date.parse(extended.body.data.expires_at) - Date.parse(created.body.data.expires_at)).toBe(30 * 60_000);
    expect((await api('GET', `/sandboxes/${name}`)).body.data).toMatchObject({ status: 'running', expires_at: extended.body.data.expires_at });
    expect((await api('POST', `/sandboxes/${name}/extend`)).status).toBe(200);

    expect((await api('POST', `/sandboxes/${name}/stop`)).body.data.status).toBe('stopped');
    expect((await api('POST', `/sandboxes/${name}/extend`, { by: '1d' })).body.data.expires_at).toBeDefined();
    expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('stopped');
    expect((await api('POST', `/sandboxes/${name}/start`)).body.data.status).toBe('running');
    expect((await api('DELETE', `/sandboxes/${name}`)).body.data).toBe(`sandbox '${name}' removed`);
    // The engine removes the container in the background, once the record is gone.
    await rt.services.departures.settled();
    expect(await containerOf(uuid)).toBeUndefined();
  });

  it('refuses: 409 recover of a non-archived sandbox, 404 unknowns, 400 bad durations and names', async () => {
    const name = uniqueName('refuse');
    await api('POST', '/sandboxes', { name });
    const recover = await api('POST', `/sandboxes/${name}/recover`);
    expect(recover.status).toBe(409);
    expect(recover.body.error).toContain('not archived');
    for (const [method, path, body] of [
      ['POST', '/sandboxes/no-such-sandbox/recover'],
      ['POST', '/sandboxes/no-such-sandbox/extend', {}],
      ['POST', '/sandboxes/no-such-sandbox/resize', { vcpus: 1 }],
      ['POST', '/snapshots', { sandbox: 'no-such-sandbox', name: uniqueName('x') }],
      ['GET', '/snapshots/no-such-snapshot'],
      ['DELETE', '/snapshots/no-such-snapshot'],
      ['POST', '/snapshots/no-such-snapshot/restore', {}],
    ] as [string, string, unknown?][]) {
      expect((await api(method, path, body)).status, `${method} ${path}`).toBe(404);
    }
    for (const body of [{ by: '1w' }, { by: '90' }, { by: '' }, { by: '-1h' }]) {
      const res = await api('POST', `/sandboxes/${name}/extend`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toContain('by:');
    }
    expect((await api('POST', '/sandboxes', { name: uniqueName('ttl'), ttl: 'forever' })).status).toBe(400);
    expect((await api('POST', '/sandboxes/UPPER/recover')).status).toBe(400);
    expect((await api('POST', '/snapshots', { sandbox: name, name: 'no spaces' })).status).toBe(400);
    expect((await api('POST', '/lifecycle/reconcile', { dry_run: 1 })).status).toBe(400);
  });

  it('any -> reconcile: stop, archive (files kept as an image) and delete by policy; archived -> recover -> start', async () => {
    const stopper = uniqueName('pol-stop');
    const archiver = uniqueName('pol-arch');
    await api('POST', '/sandboxes', { name: stopper, lifecycle: { auto_stop_after_seconds: 600 } });
    const arch = (await api('POST', '/sandboxes', { name: archiver, lifecycle: { auto_archive_after_seconds: 1200 } })).body.data;
    await api('PUT', `/sandboxes/${archiver}/files/workspace/notes.txt`, { content: 'archived with me' });
    await exec(archiver, 'mkdir -p /home/sandbox/deep && echo outside-workspace > /home/sandbox/deep/f');

    time.advance(600);
    const preview = await api('POST', '/lifecycle/reconcile', { dry_run: true });
    expect(preview.body.data.actions).toEqual(expect.arrayContaining([{ sandbox: stopper, action: 'stop', reason: 'idle for 600s (auto_stop_after_seconds: 600)' }]));
    expect(preview.body.data.stopped).toEqual([]);
    expect((await api('GET', `/sandboxes/${stopper}`)).body.data.status).toBe('running');
    const first = await api('POST', '/lifecycle/reconcile', {});
    expect(first.body.data.stopped).toContain(stopper);
    expect((await api('GET', `/sandboxes/${stopper}`)).body.data.status).toBe('stopped');

    time.advance(600);
    const second = (await api('POST', '/lifecycle/reconcile')).body.data;
    expect(second.archived).toContain(archiver);
    const archived = (await api('GET', `/sandboxes/${archiver}`)).body.data;
    expect(archived).toMatchObject({ status: 'archived', archived_reason: expect.stringContaining('auto_archive_after_seconds') });
    expect(archived.archived_at).toBeDefined();
    expect(await containerOf(arch.uuid)).toBeUndefined();
    expect(await imageExists(`sandboxd-archive:${arch.uuid}`)).toBe(true);

    const start = await api('POST', `/sandboxes/${archiver}/start`);
    expect(start.status).toBe(409);
    expect(start.body.error).toContain('recover');
    expect((await api('POST', `/sandboxes/${archiver}/exec`, { command: ['true'] })).status).toBe(409);

    const recovered = await api('POST', `/sandboxes/${archiver}/recover`);
    expect(recovered.status).toBe(200);
    expect(recovered.body.data.status).toBe('stopped');
    expect(recovered.body.data.archived_at).toBeUndefined();
    expect((await api('POST', `/sandboxes/${archiver}/start`)).body.data.status).toBe('running');
    expect((await api('GET', `/sandboxes/${archiver}/files/workspace/notes.txt`)).body.data.content).toBe('archived with me');
    expect((await exec(archiver, 'cat /home/sandbox/deep/f')).output).toBe('outside-workspace\n');
    expect(await events(archiver)).toEqual(expect.arrayContaining(['sandbox_archived', 'sandbox_recovered', 'sandbox_started']));

    // Delete counts from archived_at and applies to archived sandboxes only.
    const deleter = uniqueName('pol-del');
    const del = (await api('POST', '/sandboxes', { name: deleter, lifecycle: { auto_archive_after_seconds: 60, auto_delete_after_seconds: 60 } })).body.data;
    time.advance(60);
    expect((await api('POST', '/lifecycle/reconcile')).body.data.archived).toContain(deleter);
    time.advance(59);
    expect((await api('POST', '/lifecycle/reconcile')).body.data.removed).not.toContain(deleter);
    time.advance(1);
    expect((await api('POST', '/lifecycle/reconcile')).body.data.removed).toContain(deleter);
    expect((await api('GET', `/sandboxes/${deleter}`)).status).toBe(404);
    expect(await imageExists(`sandboxd-archive:${del.uuid}`)).toBe(false);

    // Removing a recovered sandbox takes its archive image along.
    expect((await api('DELETE', `/sandboxes/${archiver}`)).status).toBe(200);
    await rt.services.departures.settled();
    expect(await imageExists(`sandboxd-archive:${arch.uuid}`)).toBe(false);
  });

  it('gc removes sandboxes past their TTL', async () => {
    const name = uniqueName('ttl');
    const sb = (await api('POST', '/sandboxes', { name, ttl: '1h' })).body.data;
    expect((await api('POST', '/gc')).body.data.removed).not.toContain(name);
    time.advance(3601);
    const gc = (await api('POST', '/gc')).body.data;
    expect(gc.removed).toContain(name);
    expect(gc.count).toBe(gc.removed.length);
    await rt.services.departures.settled();
    expect(await containerOf(sb.uuid)).toBeUndefined();
    expect((await api('GET', `/sandboxes/${name}`)).status).toBe(404);
  });
});
