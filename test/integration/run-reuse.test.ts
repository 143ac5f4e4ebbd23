import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Profile } from '../../src/backends/backend.js';
import { docker } from '../helpers/docker.js';
import { dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * The leak test: a fast run leaves something in every writable path, processes (in its group
 * and in sessions of their own), System V and POSIX IPC objects, environment and limit changes
 * and listening sockets; the next run, on the same container, finds none of it. Under runc
 * (moderate) and gVisor (restrictive), as the default user and as root.
 */
const PYTHON = 'sandboxd/python:bookworm';
const LEAK = readFileSync(new URL('./fixtures/leak.py', import.meta.url), 'utf8');

let rt: DockerRuntime;

beforeAll(async () => {
  // Size 0: no instance is made ahead of demand, so a run lands on the one the previous run used.
  rt = await dockerRuntime({ poolSize: 0, allowSudoExec: true });
});

afterAll(async () => {
  const instanceId = rt.deploymentId;
  await rt.dispose();
  expect(await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`)).toBe('');
});

/** One fast run of the fixture; the container it ran in and what it printed. */
async function run(profile: Profile, args: string[], sudo = false) {
  let sandbox = '';
  const result = await rt.services.runs.run(
    { command: ['python3', '-c', LEAK, ...args], image: PYTHON, profile, sudo },
    { onStarted: (name) => (sandbox = name) },
  );
  expect(result.exit_code, result.output).toBe(0);
  // The reset runs after the answer: wait for it, so that the next run finds the instance idle.
  await rt.services.runPool.settled();
  return { sandbox, data: JSON.parse(result.stdout) };
}

describe.each([
  ['moderate', 'runc'],
  ['restrictive', 'runsc'],
] as const)('a reused %s container', (profile, runtime) => {
  it('shows the next run nothing the previous one left', async () => {
    const pristine = await run(profile, ['check']);
    const container = await docker('ps', '-q', '--no-trunc', '--filter', `name=sandboxd-${pristine.sandbox}-`);
    expect(await docker('inspect', '--format', '{{.HostConfig.Runtime}} {{.HostConfig.ReadonlyRootfs}}', container)).toBe(`${runtime} true`);
    expect(pristine.data.found).toEqual([]);

    for (const [who, sudo] of [['user', false], ['root', true]] as const) {
      const leaked = await run(profile, ['leak', who], sudo);
      expect(leaked.sandbox).toBe(pristine.sandbox);
      expect(leaked.data.uid).toBe(sudo ? 0 : 1000);
      // Every writable place of the sandbox took something.
      if (!sudo) expect(leaked.data.written).toEqual(expect.arrayContaining(['/tmp', '/var/tmp', '/workspace', '/home/sandbox', '/dev/shm']));
      // Extended attributes too, where the sandbox's tmpfs keeps them (runc's does).
      if (!sudo && runtime === 'runc') expect(leaked.data.written).toContain('/workspace (xattr)');
      expect(leaked.data.ipc.shm).toBeGreaterThanOrEqual(0);
      expect(leaked.data.ipc.mq).toBeGreaterThanOrEqual(0);

      const after = await run(profile, ['check']);
      // The same container (the same agent, started once), and nothing of the leak in it.
      expect(after.sandbox).toBe(pristine.sandbox);
      expect(after.data.pid1_start).toBe(pristine.data.pid1_start);
      expect(after.data.found).toEqual([]);
      expect(after.data.limits).toEqual(pristine.data.limits);
    }
  });
});

describe('a run instance whose reset fails', () => {
  it('is destroyed, and the next run gets another one', async () => {
    const first = await run('moderate', ['check']);
    // Root takes away what the agent cannot give back: a lower hard limit of its own.
    const broken = await rt.services.runs.run({ command: ['prlimit', '--pid', '1', '--nofile=50:50'], image: PYTHON, sudo: true }, {});
    expect(broken.exit_code).toBe(0);
    await rt.services.runPool.settled();
    const next = await run('moderate', ['check']);
    expect(next.sandbox).not.toBe(first.sandbox);
    expect(next.data.found).toEqual([]);
    expect(await docker('ps', '-aq', '--filter', `name=sandboxd-${first.sandbox}-`)).toBe('');
  });
});
