import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker } from '../helpers/docker.js';
import { RUNSC_KERNEL_HEADROOM_MB } from '../../src/backends/docker/container-spec.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

const PYTHON = 'sandboxd/python:bookworm';
let rt: DockerRuntime;
let instanceId = '';
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);
const run = async (body: object) => {
  const res = await api('POST', '/run', body);
  expect(res.status).toBe(200);
  return res.body.data as { output: string; exit_code: number };
};

/** Unclaimed pool instances of this runtime on the engine (claimed ones are renamed). */
const unclaimed = async () =>
  (await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`, '--filter', 'label=sandboxd.role=pool', '--filter', 'name=sandboxd-pool-'))
    .split('\n')
    .filter(Boolean);

/** Run pool instances of this runtime on the engine. */
const runContainers = async () =>
  (await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`, '--filter', 'name=sandboxd-runner-')).split('\n').filter(Boolean);

const inspect = async (name: string) => {
  const uuid = (await api('GET', `/sandboxes/${name}`)).body.data.uuid as string;
  const id = await docker('ps', '-aq', '--filter', `label=sandboxd.uuid=${uuid}`);
  return { uuid, info: JSON.parse(await docker('inspect', id))[0] };
};

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 2, poolSizes: `${PYTHON}@restrictive=1` });
  instanceId = rt.deploymentId;
  await rt.services.pool.settled();
});

afterAll(async () => {
  await rt.dispose();
  // Closing the server removes its pool: nothing of this instance is left on the engine.
  expect(await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`)).toBe('');
});

describe('the warm pool', () => {
  it('keeps the configured number of pristine instances of each warmed key running', async () => {
    expect(rt.services.pool.size).toBe(3);
    const ids = await unclaimed();
    expect(ids).toHaveLength(3);
    const images = await Promise.all(ids.map((id) => docker('inspect', '--format', '{{.Config.Image}} {{.State.Running}} {{.HostConfig.Runtime}}', id)));
    expect(images.sort()).toEqual(['sandboxd/base:bookworm true runc', 'sandboxd/base:bookworm true runc', `${PYTHON} true runsc`]);
  });

  it('gives every fast run a pristine container: nothing leaks from one run to the next', async () => {
    const first = await run({ command: ['sh', '-c', 'echo secret > /workspace/leak; echo x > /tmp/leak; (sleep 300 &); cat /etc/hostname'] });
    await rt.services.runPool.settled();
    const second = await run({ command: ['sh', '-c', 'ls /workspace/leak /tmp/leak 2>&1; pgrep sleep || echo no sleep'] });
    expect(first.exit_code).toBe(0);
    const lines = second.output.trim().split('\n');
    expect(lines.slice(0, 2).every((line) => line.includes('No such file'))).toBe(true);
    expect(lines[2]).toBe('no sleep');
  });

  it('honours image and profile in fast mode, warm or cold', async () => {
    // A run container's root filesystem is read-only in every profile; its home is a tmpfs.
    const restricted = await run({
      command: ['python3', '-c', 'import os; open(os.path.expanduser("~/x"), "w"); print([l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] == "/"][0])'],
      profile: 'restrictive',
    });
    expect(restricted).toMatchObject({ output: expect.stringMatching(/^ro\b/), exit_code: 0 });
    const runtime = await docker('inspect', '--format', '{{.HostConfig.Runtime}}', ...(await runContainers()));
    expect(runtime.split('\n')).toContain('runsc');
    const cold = await run({ command: ['python3', '-c', 'print(6 * 7)'] });
    expect(cold).toMatchObject({ output: '42\n', exit_code: 0 });
  });

  it('serves a burst beyond its size and keeps the containers it used for the next runs', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => run({ command: ['echo', `run ${i}`] })));
    expect(results.map((r) => r.output)).toEqual(['run 0\n', 'run 1\n', 'run 2\n', 'run 3\n', 'run 4\n']);
    await rt.services.runPool.settled();
    // Fast runs leave the claim pool alone; the run pool grew past its size (2) with the burst.
    expect(rt.services.pool.size).toBe(3);
    expect(await unclaimed()).toHaveLength(3);
    const target = rt.services.runPool.target({ image: 'sandboxd/base:bookworm', profile: 'moderate' });
    expect(target).toBeGreaterThan(2);
    expect((await runContainers()).length).toBeGreaterThanOrEqual(target);
  });
});

describe('creating a sandbox from the pool', () => {
  it('claims a ready instance and gives it the name, limits, labels and env asked for', async () => {
    await rt.services.pool.settled();
    const name = uniqueName('pooled');
    const created = await api('POST', '/sandboxes', { name, vcpus: 2, memory_mb: 1024, labels: { team: 'a' }, env: { GREETING: 'hello there' } });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name, status: 'running', vcpus: 2, memory_mb: 1024, labels: { team: 'a' } });
    const { uuid, info } = await inspect(name);
    // The engine's name for the container follows just after the answer (DockerBackend.claim).
    await expect.poll(async () => (await inspect(name)).info.Name).toBe(`/sandboxd-${name}-${uuid.slice(-8)}`);
    expect(info.Config.Labels['sandboxd.role']).toBe('pool');
    expect([info.HostConfig.NanoCpus, info.HostConfig.Memory]).toEqual([2e9, 1024 * 1024 * 1024]);
    const greeting = ['sh', '-c', 'echo "$GREETING"'];
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: greeting })).body.data.output).toBe('hello there\n');
    const detached = await api('POST', `/sandboxes/${name}/exec/detach`, { command: greeting });
    await expect
      .poll(async () => (await api('GET', `/sandboxes/${name}/exec/detached/${detached.body.data.id}/logs`)).body.data)
      .toMatchObject({ content: 'hello there\n' });
    const logs = (await api('GET', `/sandboxes/${name}/logs`)).body.data as { event: string; pooled?: boolean }[];
    expect(logs.find((entry) => entry.event === 'sandbox_created')).toMatchObject({ pooled: true });

    // The env stays after a restart of the container, and the sandbox survives a server restart.
    expect((await api('POST', `/sandboxes/${name}/stop`)).status).toBe(200);
    expect((await api('POST', `/sandboxes/${name}/start`)).status).toBe(200);
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: greeting })).body.data.output).toBe('hello there\n');
    const dataDir = rt.dataDir;
    await rt.close();
    rt = await dockerRuntime({ dataDir, poolSize: 2, poolSizes: `${PYTHON}@restrictive=1` });
    expect((await api('GET', `/sandboxes/${name}`)).body.data.status).toBe('running');
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: greeting })).body.data.output).toBe('hello there\n');
    await rt.services.pool.settled();
  });

  it('creates the usual way where a pool instance does not fit', async () => {
    const name = uniqueName('unfit');
    // gVisor cannot change limits in place: the ready restrictive instance stays in the pool.
    const created = await api('POST', '/sandboxes', { name, image: PYTHON, profile: 'restrictive', memory_mb: 256 });
    expect(created.status).toBe(201);
    const { info } = await inspect(name);
    expect(info.Config.Labels['sandboxd.role']).toBe('sandbox');
    // Its memory_mb, and the headroom of gVisor's own kernel (RUNSC_KERNEL_HEADROOM_MB) beside it.
    expect(info.HostConfig.Memory).toBe((256 + RUNSC_KERNEL_HEADROOM_MB) * 1024 * 1024);
    await rt.services.pool.settled();
    expect(rt.services.pool.size).toBeGreaterThanOrEqual(3);
  });

  it('refuses bad pool input on the API like any other', async () => {
    expect((await api('POST', '/run', { command: ['true'], fast: 'yes' })).status).toBe(400);
    expect((await api('POST', '/run', { command: ['true'], profile: 'lenient' })).status).toBe(400);
  });
});
