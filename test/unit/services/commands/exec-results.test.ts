import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  h.backend.onExec = (request) => {
    if (request.command[0] === 'hog') return { oom: true, chunks: [{ stream: 'stderr', text: 'Killed\n' }] };
    if (request.command[0] === 'slow') return { hang: true };
    return { chunks: [{ stream: 'stdout', text: 'x'.repeat(64) }] };
  };
});
afterEach(() => h.close());

const post = async (url: string, payload: object) => {
  const response = await h.app.inject({ method: 'POST', url, payload });
  return { status: response.statusCode, body: response.json() as any };
};

describe('what an exec result says about how the command ended', () => {
  it('says oom_killed where the OOM killer ended the command, and nothing of it otherwise', async () => {
    await post('/sandboxes', { name: 'm' });
    const hog = await post('/sandboxes/m/exec', { command: ['hog'] });
    expect(hog.body.data).toMatchObject({ exit_code: 137, oom_killed: true, timed_out: false });
    const plain = await post('/sandboxes/m/exec', { command: ['echo'] });
    expect(plain.body.data).not.toHaveProperty('oom_killed');
  });

  it('gives /batch/run items timed_out and truncated (and oom_killed)', async () => {
    const { body } = await post('/batch/run', { commands: [{ command: ['slow'], timeout_ms: 50 }, { command: ['hog'] }, { command: ['echo'] }] });
    expect(body.data.results).toEqual([
      { output: '', error: null, exit_code: 124, timed_out: true, truncated: false },
      { output: 'Killed\n', error: null, exit_code: 137, timed_out: false, truncated: false, oom_killed: true },
      { output: 'x'.repeat(64), error: null, exit_code: 0, timed_out: false, truncated: false },
    ]);
  });

  it('gives the done event of /run/stream timed_out and truncated', async () => {
    const response = await h.app.inject({ method: 'POST', url: '/run/stream', payload: { command: ['slow'], timeout_ms: 50 } });
    const done = response.body.split('\n\n').find((block) => block.includes('event: done'))!;
    expect(JSON.parse(/data: (.*)/.exec(done)![1]!)).toMatchObject({ exit_code: 124, timed_out: true, truncated: false });
  });
});

describe('detached commands', () => {
  it('refuse stdin and timeout_ms, naming them, instead of ignoring them', async () => {
    h.backend.declare('detached');
    await post('/sandboxes', { name: 'd' });
    const both = await post('/sandboxes/d/exec/detach', { command: ['sleep', '9'], stdin: 'x', timeout_ms: 1000 });
    expect(both.status).toBe(400);
    expect(both.body.error).toContain('stdin, timeout_ms: not taken by a detached command');
    const one = await post('/sandboxes/d/exec/detach', { command: ['sleep', '9'], timeout_ms: 1000 });
    expect(one.status).toBe(400);
    expect(one.body.error).toMatch(/^timeout_ms: /);
    expect((await post('/sandboxes/d/exec/detach', { command: ['sleep', '9'] })).status).toBe(200);
  });
});
