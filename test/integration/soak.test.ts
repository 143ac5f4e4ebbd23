import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker } from '../helpers/docker.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * The soak of issue 3: 1,000 fast runs and 5,000 execs in a row leave no container, process or
 * file descriptor behind, counted before and after (the server runs in this process).
 */
const RUNS = 1000;
const EXECS = 5000;
const CLIENTS = 4;

let rt: DockerRuntime;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

const openFds = () => readdirSync('/proc/self/fd').length;
/** Containers of this runtime on the engine, running or not. */
const containers = async () => (await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${rt.instanceId}`)).split('\n').filter(Boolean).sort();
/** Processes inside a sandbox, and the agent's open descriptors, seen from a command of its own. */
const inside = async (name: string) => {
  const res = await api('POST', `/sandboxes/${name}/exec`, {
    command: ['sh', '-c', 'ls -d /proc/[0-9]* | wc -l; ls /proc/1/fd | wc -l'],
    sudo: true,
  });
  const [processes, agentFds] = (res.body.data.output as string).trim().split('\n').map(Number);
  return { processes, agentFds };
};

/** Runs `work(i)` for i < total with `clients` callers at once; the first failure stops it. */
async function repeat(total: number, clients: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) await work(next++);
    }),
  );
}

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: CLIENTS, allowSudoExec: true });
  await rt.services.pool.settled();
});

afterAll(async () => {
  await rt?.dispose();
});

describe('soak', () => {
  it(`${RUNS} fast runs leave no container and no descriptor behind`, { timeout: 900_000 }, async () => {
    // Warm up (first connections, lazily loaded modules), then count.
    await api('POST', '/run', { command: ['true'] });
    await rt.services.pool.settled();
    const before = { containers: await containers(), fds: openFds() };
    await repeat(RUNS, CLIENTS, async (i) => {
      const res = await api('POST', '/run', { command: ['sh', '-c', `echo run ${i}; echo err >&2`] });
      expect(res.body.data).toMatchObject({ exit_code: 0, stdout: `run ${i}\n`, stderr: 'err\n' });
    });
    await rt.services.pool.settled();
    // The pool holds as many ready containers as before, none of them a used one.
    expect((await containers()).length).toBe(before.containers.length);
    expect(rt.services.pool.size).toBe(CLIENTS);
    expect(openFds()).toBeLessThanOrEqual(before.fds + 2);
  });

  it(`${EXECS} execs leave no process and no descriptor behind, in the sandbox or in the server`, { timeout: 900_000 }, async () => {
    const name = uniqueName('soak');
    expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
    await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] });
    const before = { inside: await inside(name), fds: openFds() };
    await repeat(EXECS, CLIENTS, async (i) => {
      const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', `echo ${i}; sleep 0 &`] });
      expect(res.body.data).toMatchObject({ exit_code: 0, output: `${i}\n` });
    });
    expect(await inside(name)).toEqual(before.inside);
    expect(openFds()).toBeLessThanOrEqual(before.fds + 2);
    await api('DELETE', `/sandboxes/${name}`);
  });
});
