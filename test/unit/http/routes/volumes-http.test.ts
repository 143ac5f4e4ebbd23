import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { volumePathProblem } from '../../../../src/domain/volumes.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
});
afterEach(() => h.close());

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) => h.app.inject({ method, url, ...(payload ? { payload } : {}) });

describe('volumes', () => {
  it('creates, lists, gets and deletes a volume', async () => {
    const created = await call('POST', '/volumes', { name: 'data' });
    expect(created.statusCode).toBe(201);
    expect(created.json().data).toEqual({ name: 'data', created_at: expect.any(String), in_use_by: [] });
    expect((await call('POST', '/volumes', { name: 'data' })).statusCode).toBe(409);
    expect((await call('GET', '/volumes')).json().data.map((v: { name: string }) => v.name)).toEqual(['data']);
    expect((await call('GET', '/volumes/data')).json().data.name).toBe('data');
    expect((await call('DELETE', '/volumes/data')).statusCode).toBe(200);
    expect((await call('GET', '/volumes/data')).statusCode).toBe(404);
    expect((await call('DELETE', '/volumes/data')).statusCode).toBe(404);
    expect((await call('POST', '/volumes', { name: 'Bad Name' })).statusCode).toBe(400);
  });

  it("takes the agentkernel SDK's short form name:/path[:ro] beside the object form, and names what is wrong in a bad one", async () => {
    await call('POST', '/volumes', { name: 'data' });
    await call('POST', '/volumes', { name: 'logs' });
    const created = await call('POST', '/sandboxes', { name: 's', volumes: ['data:/workspace/data:ro', 'logs:/logs'] });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().data.volumes).toEqual([
      { name: 'data', path: '/workspace/data', read_only: true },
      { name: 'logs', path: '/logs' },
    ]);
    for (const [bad, words] of [
      ['data', 'volumes[0]: must be an object {name, path, read_only?} or a string name:/path[:ro]'],
      ['data:relative', 'volumes[0]: must be an object {name, path, read_only?} or a string name:/path[:ro]'],
      ['data:/x:rx', 'volumes[0]: must be an object {name, path, read_only?} or a string name:/path[:ro]'],
      ['Bad Name:/x', "volumes[0].name: "],
    ] as const) {
      const refused = await call('POST', '/sandboxes', { name: 'u', volumes: [bad] });
      expect(refused.statusCode, bad).toBe(400);
      expect(refused.json().error, bad).toContain(words);
    }
    expect((await call('POST', '/sandboxes', { name: 'u', volumes: ['data:/etc'] })).statusCode).toBe(400);
  });

  it('mounts volumes at create; 409 on delete while a sandbox (even stopped) mounts it', async () => {
    await call('POST', '/volumes', { name: 'data' });
    const created = await call('POST', '/sandboxes', { name: 's', volumes: [{ name: 'data', path: '/workspace/data', read_only: true }] });
    expect(created.statusCode).toBe(201);
    expect(created.json().data.volumes).toEqual([{ name: 'data', path: '/workspace/data', read_only: true }]);
    const instance = [...h.backend.instances.values()][0]!;
    expect(instance.spec.volumes).toEqual([{ name: 'data', path: '/workspace/data', read_only: true }]);
    expect((await call('GET', '/volumes/data')).json().data.in_use_by).toEqual(['s']);
    await call('POST', '/sandboxes/s/stop');
    const refused = await call('DELETE', '/volumes/data');
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error).toContain("'s'");
    await call('POST', '/sandboxes', { name: 't', volumes: [{ name: 'data', path: '/workspace/data' }] });
    expect((await call('DELETE', '/volumes/data')).json().error).toBe("volume 'data' is mounted by sandboxes 's', 't': delete them first");
    await call('DELETE', '/sandboxes/t');
    await call('DELETE', '/sandboxes/s');
    expect((await call('DELETE', '/volumes/data')).statusCode).toBe(200);
  });

  it('refuses bad mounts with 400 naming the field, an unknown volume with 404', async () => {
    await call('POST', '/volumes', { name: 'data' });
    const bad = async (volumes: object[]) => (await call('POST', '/sandboxes', { name: 'bad', volumes })).json();
    expect((await bad([{ name: 'data', path: '/' }])).error).toMatch(/^volumes\[0\]\.path: /);
    expect((await bad([{ name: 'data', path: '/etc' }])).error).toContain('system directory');
    expect((await bad([{ name: 'data', path: '/usr/local/x' }])).error).toContain('under /usr');
    expect((await bad([{ name: 'data', path: 'relative' }])).error).toContain('absolute');
    expect((await bad([{ name: 'data', path: '/a/../etc' }])).error).toContain("'..'");
    expect((await bad([{ name: 'data', path: '/a' }, { name: 'data', path: '/b' }])).error).toMatch(/^volumes\[1\]\.name: .*mounted once/);
    const unknown = await call('POST', '/sandboxes', { name: 'bad', volumes: [{ name: 'nope', path: '/data' }] });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toContain("volume 'nope' not found");
    expect((await call('GET', '/sandboxes/bad')).statusCode).toBe(404);
  });

  it('answers 422 where the backend has no volumes', async () => {
    h.backend.omit('volumes');
    expect((await call('POST', '/volumes', { name: 'data' })).statusCode).toBe(422);
    expect((await call('POST', '/sandboxes', { name: 's', volumes: [{ name: 'data', path: '/data' }] })).statusCode).toBe(422);
  });

  it('a create with volumes takes no pool instance unless the claim adds mounts', async () => {
    const pooled = await fakeHarness({ poolSize: 2 });
    try {
      pooled.services.pool.warm();
      await pooled.services.pool.settled();
      const claims = () => pooled.backend.calls.filter((c) => c.op === 'claim').length;
      await pooled.app.inject({ method: 'POST', url: '/volumes', payload: { name: 'data' } });
      await pooled.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 's', volumes: [{ name: 'data', path: '/data' }] } });
      expect(claims()).toBe(0);
      pooled.backend.fakeVolumes.mountsOnClaim = true;
      await pooled.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 't', volumes: [{ name: 'data', path: '/data' }] } });
      expect(claims()).toBe(1);
      await pooled.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'u' } });
      expect(claims()).toBe(2);
    } finally {
      await pooled.close();
    }
  });

  it('snapshots say that volume contents are not in them', async () => {
    await call('POST', '/volumes', { name: 'data' });
    await call('POST', '/sandboxes', { name: 's', volumes: [{ name: 'data', path: '/data' }] });
    await call('POST', '/sandboxes', { name: 'plain' });
    const taken = await call('POST', '/snapshots', { sandbox: 's', name: 'snap' });
    expect(taken.statusCode).toBe(201);
    expect(taken.json().data.note).toBe("not included: the contents of volume 'data' (/data); a restored sandbox mounts no volumes");
    expect((await call('GET', '/snapshots/snap')).json().data.note).toContain("'data'");
    expect((await call('POST', '/snapshots', { sandbox: 'plain', name: 'snap2' })).json().data.note).toBeUndefined();
    const restored = await call('POST', '/snapshots/snap/restore', { as_name: 'r' });
    expect(restored.json().data.volumes).toBeUndefined();
  });

  it('allows paths that are not system directories', () => {
    expect(volumePathProblem('/data')).toBeUndefined();
    expect(volumePathProblem('/workspace/cache')).toBeUndefined();
    expect(volumePathProblem('/home/user/.cache')).toBeUndefined();
    expect(volumePathProblem('/variable')).toBeUndefined();
    expect(volumePathProblem('/var/lib/x')).toContain('/var');
  });
});
