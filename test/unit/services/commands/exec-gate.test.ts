import { afterEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { execBody } from '../../../../src/schemas/exec-schemas.js';
import { runBody } from '../../../../src/schemas/run-schemas.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

/** Each command request passes the service's gate exactly once, whichever way it enters. */
describe('the gate of a command request', () => {
  let h: FakeHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** The harness with sandbox `a` running and a spy on the gate, reset after the setup. */
  async function spied(allowSudoExec = true): Promise<{ h: FakeHarness; gate: MockInstance }> {
    h = await fakeHarness({ allowSudoExec });
    await h.services.sandboxes.create({ name: 'a' });
    const gate = vi.spyOn(h.services.exec, 'gate');
    return { h, gate };
  }

  const post = (harness: FakeHarness, url: string, payload: object) => harness.app.inject({ method: 'POST', url, payload });

  it('runs once per HTTP request: exec, streamed exec, detach, run (fast or not), streamed run', async () => {
    const { h, gate } = await spied();
    const requests: [string, object, number][] = [
      ['/sandboxes/a/exec', { command: ['id'], sudo: true }, 200],
      ['/sandboxes/a/exec/stream', { command: ['id'] }, 200],
      // The fake backend has no detached commands: the request is gated before the backend says so.
      ['/sandboxes/a/exec/detach', { command: ['sleep', '9'] }, 422],
      ['/run', { command: ['id'], sudo: true }, 200],
      ['/run', { command: ['id'], fast: false }, 200],
      ['/run/stream', { command: ['id'], sudo: true }, 200],
      ['/run/stream', { command: ['id'], fast: false }, 200],
    ];
    for (const [url, payload, status] of requests) {
      gate.mockClear();
      const response = await post(h, url, payload);
      expect(response.statusCode, `${url} ${response.body}`).toBe(status);
      expect(gate, `${url} ${JSON.stringify(payload)}`).toHaveBeenCalledTimes(1);
      expect(gate).toHaveBeenCalledWith(expect.objectContaining({ sudo: 'sudo' in payload }));
    }
  });

  it('runs once per command of a batch', async () => {
    const { h, gate } = await spied();
    const response = await post(h, '/batch/run', { commands: [{ command: ['a'] }, { command: ['b'], fast: false }, { command: ['c'], sudo: true }] });
    expect(response.statusCode).toBe(200);
    expect(gate).toHaveBeenCalledTimes(3);
  });

  it('runs once when it refuses, before the policy and before anything is made', async () => {
    const { h, gate } = await spied(false);
    for (const url of ['/run', '/run/stream', '/sandboxes/a/exec', '/sandboxes/a/exec/stream']) {
      gate.mockClear();
      const response = await post(h, url, { command: ['id'], sudo: true });
      expect(response.statusCode, url).toBe(403);
      expect(response.json().error).toContain('sudo exec is disabled');
      expect(gate, url).toHaveBeenCalledTimes(1);
    }
    expect(h.backend.calls.filter((c) => c.op === 'exec')).toEqual([]);
  });

  it('runs once for a call of the service itself, and for a schedule at create and at each fire', async () => {
    const { h, gate } = await spied();
    await h.services.exec.exec('a', { command: ['id'] });
    expect(gate).toHaveBeenCalledTimes(1);
    gate.mockClear();
    await h.services.runs.run({ command: ['id'], fast: false });
    expect(gate).toHaveBeenCalledTimes(1);

    gate.mockClear();
    const created = await post(h, '/schedules', { name: 'nightly', method: 'run', args: { command: ['id'] }, cron: '0 3 * * *' });
    expect(created.statusCode, created.body).toBe(201);
    expect(gate).toHaveBeenCalledTimes(1);
    gate.mockClear();
    // A trigger answers once its run ended.
    const triggered = await post(h, '/schedules/nightly/trigger', {});
    expect(triggered.json().data, triggered.body).toMatchObject({ status: 'succeeded' });
    expect(gate).toHaveBeenCalledTimes(1);
  });
});

describe('the exec schema', () => {
  it('refuses a relative workdir at the edge, in exec and run bodies alike', () => {
    for (const schema of [execBody, runBody]) {
      const parsed = schema.safeParse({ command: ['ls'], workdir: 'relative' });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues).toEqual([expect.objectContaining({ path: ['workdir'], message: "'relative' must be an absolute path" })]);
      expect(schema.safeParse({ command: ['ls'], workdir: '/tmp' }).success).toBe(true);
    }
  });
});
