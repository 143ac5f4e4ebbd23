import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { docker } from '../helpers/docker.js';

let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
  api = (method, path, body) => call(rt.url, method, path, body);
});

afterAll(async () => {
  await rt?.dispose();
});

describe('a sandbox whose container is removed with docker rm', () => {
  it('is lost with a reason, and start says it made a new, empty container', async () => {
    const name = uniqueName('lost');
    const created = (await api('POST', '/sandboxes', { name })).body.data;
    await api('PUT', `/sandboxes/${name}/files/workspace/work.txt`, { content: 'done' });
    const container = await docker('ps', '-aq', '--filter', `label=sandboxd.uuid=${created.uuid}`);
    await docker('rm', '-f', container);

    const lost = (await api('GET', `/sandboxes/${name}`)).body.data;
    expect(lost.status).toBe('lost');
    expect(lost.status_reason).toContain(`its container ${container.slice(0, 12)} was removed outside sandboxd`);
    const exec = await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] });
    expect([exec.status, exec.body.hint]).toEqual([409, { action: 'start', sandbox: name }]);

    const started = await api('POST', `/sandboxes/${name}/start`);
    expect(started.body.data).toMatchObject({ status: 'running', recreated: true });
    const gone = await api('GET', `/sandboxes/${name}/files/workspace/work.txt`);
    expect(gone.status, JSON.stringify(gone.body)).toBe(404);
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['echo', 'again'] })).body.data.stdout).toBe('again\n');
    expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('running');
    await api('DELETE', `/sandboxes/${name}`);
  });
});
