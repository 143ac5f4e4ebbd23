import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

let rt: DockerRuntime;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
});

afterAll(async () => {
  await rt.dispose();
});

interface Run {
  status: string;
  scheduled_for: string;
  result: { exit_code: number; stdout: string } | null;
  error: string | null;
}

/** Polls a schedule's runs until `done` holds (at most `seconds`). */
async function runsUntil(name: string, done: (runs: Run[]) => boolean, seconds = 60): Promise<Run[]> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const runs = (await api('GET', `/schedules/${name}/runs?limit=100`)).body.data as Run[];
    if (done(runs)) return runs;
    if (Date.now() > deadline) throw new Error(`runs of ${name} never got there: ${JSON.stringify(runs)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('schedules on Docker', () => {
  it('fires an exec target in its sandbox every second, each run once', async () => {
    const box = uniqueName('sched');
    expect((await api('POST', '/sandboxes', { name: box })).status).toBe(201);
    const name = uniqueName('ticks');
    const created = await api('POST', '/schedules', {
      name,
      cron: '* * * * * *',
      method: 'exec',
      target_sandbox: box,
      args: { command: ['sh', '-c', 'echo tick >> /workspace/ticks; wc -l < /workspace/ticks'] },
    });
    expect(created.status).toBe(201);
    await runsUntil(name, (runs) => runs.filter((r) => r.status === 'succeeded').length >= 3);
    expect((await api('PATCH', `/schedules/${name}`, { status: 'paused' })).body.data.next_fire_at).toBeNull();
    const runs = await runsUntil(name, (all) => all.every((r) => r.status !== 'running'));
    const succeeded = runs.filter((r) => r.status === 'succeeded');
    // Every run that succeeded appended one line, and nothing else did.
    const file = (await api('GET', `/sandboxes/${box}/files/workspace/ticks`)).body.data.content as string;
    expect(file.split('\n').filter(Boolean)).toHaveLength(succeeded.length);
    expect(succeeded.map((r) => Number(r.result!.stdout.trim())).sort((a, b) => a - b)).toEqual(succeeded.map((_, i) => i + 1));
    expect(new Set(runs.map((r) => r.scheduled_for)).size).toBe(runs.length);
    expect((await api('DELETE', `/schedules/${name}`)).body.data).toBe(`schedule '${name}' deleted`);
  });

  it('fires a /run target in a fresh container at its fire_at, then completes', async () => {
    const name = uniqueName('once');
    const fireAt = new Date(Date.now() + 1500).toISOString();
    const created = await api('POST', '/schedules', { name, fire_at: fireAt, method: 'run', args: { command: ['sh', '-c', 'echo ran in $(hostname)'] } });
    expect(created.status).toBe(201);
    const [run] = await runsUntil(name, (runs) => runs.some((r) => r.status !== 'running'));
    expect(run).toMatchObject({ status: 'succeeded', scheduled_for: fireAt, error: null });
    expect(run!.result).toMatchObject({ exit_code: 0, stdout: expect.stringMatching(/^ran in \S+\n$/) });
    expect((await api('GET', `/schedules/${name}`)).body.data).toMatchObject({ status: 'completed', last_run_status: 'succeeded', fire_count: 1 });
    // Trigger runs it again now, and a failing command is a failed run with its output kept.
    await api('DELETE', `/schedules/${name}`);
    const failing = uniqueName('fails');
    await api('POST', '/schedules', { name: failing, cron: '@yearly', method: 'run', args: { command: ['sh', '-c', 'echo bad >&2; exit 3'] } });
    const triggered = (await api('POST', `/schedules/${failing}/trigger`)).body.data;
    expect(triggered).toMatchObject({ status: 'failed', error: 'the command exited with 3', result: { exit_code: 3, stderr: 'bad\n' } });
    await api('DELETE', `/schedules/${failing}`);
  });
});
