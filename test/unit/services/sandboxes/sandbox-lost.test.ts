import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

/** A running sandbox whose container the fake engine then forgets, as `docker rm -f` would. */
async function lostSandbox(name = 'gone'): Promise<string> {
  h = await fakeHarness();
  await h.services.sandboxes.create({ name });
  await h.services.files.write(name, '/workspace/work.txt', 'done');
  const { backend_id: backendId } = await h.services.sandboxes.requireRunning(name);
  h.backend.instances.delete(backendId);
  return name;
}

describe('a sandbox whose container was removed behind the service', () => {
  it('is lost, with a reason, in the list and in its detail (HTTP)', async () => {
    const name = await lostSandbox();
    const detail = (await h.app.inject({ url: `/sandboxes/${name}` })).json().data;
    expect(detail.status).toBe('lost');
    expect(detail.status_reason).toMatch(/^its container \S+ was removed outside sandboxd \(noticed .+\); its files are gone: start makes a new container/);
    const list = (await h.app.inject({ url: '/sandboxes' })).json().data;
    expect(list.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([[name, 'lost']]);
    expect((await h.services.logs(name)).filter((entry) => entry.event === 'sandbox_lost')).toHaveLength(1);
  });

  it('refuses exec, files and resize with a 409 that says it is lost and names start; stop leaves it lost', async () => {
    const name = await lostSandbox();
    await h.services.sandboxes.get(name);
    const exec = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/exec`, payload: { command: ['true'] } });
    expect(exec.statusCode).toBe(409);
    expect(exec.json()).toMatchObject({ error: expect.stringContaining(`sandbox '${name}' is lost`), hint: { action: 'start', sandbox: name } });
    const read = await h.app.inject({ url: `/sandboxes/${name}/files/workspace/work.txt` });
    expect([read.statusCode, read.json().hint]).toEqual([409, { action: 'start', sandbox: name }]);
    const resize = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/resize`, payload: { vcpus: 1 } });
    expect(resize.statusCode).toBe(409);
    expect(resize.json().error).toContain('was removed outside sandboxd');
    const stop = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/stop` });
    expect(stop.json().data.status).toBe('lost');
  });

  it('is started as a new, empty container, and the answer says recreated: true', async () => {
    const name = await lostSandbox();
    const started = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/start` });
    expect(started.statusCode).toBe(200);
    expect(started.json().data).toMatchObject({ status: 'running', recreated: true });
    expect(started.json().data.status_reason).toBeUndefined();
    expect(await h.services.files.read(name, '/workspace/work.txt').catch((err: { code: string }) => err.code)).toBe('NOT_FOUND');
    expect((await h.services.logs(name)).map((entry) => entry.event)).toEqual(expect.arrayContaining(['sandbox_recreated', 'sandbox_started']));
    // A plain start afterwards is no re-creation.
    await h.services.sandboxes.stop(name);
    expect((await h.services.sandboxes.start(name)).recreated).toBeUndefined();
  });

  it('is lost when a stop finds its container gone', async () => {
    const name = await lostSandbox();
    expect((await h.services.sandboxes.stop(name)).status).toBe('lost');
  });
});
