import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  h.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'out\n' }, { stream: 'stderr', text: 'err\n' }] });
  await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'sdk' } });
});
afterEach(() => h.close());

describe('what the agentkernel SDK 0.18.1 reads', () => {
  it('finds data in streamed output events, besides content', async () => {
    const response = await h.app.inject({ method: 'POST', url: '/run/stream', payload: { command: ['echo'] } });
    const outputs = response.body
      .split('\n\n')
      .filter((block) => block.includes('event: output'))
      .map((block) => JSON.parse(/data: (.*)/.exec(block)![1]!));
    expect(outputs).toEqual([
      { content: 'out\n', stream: 'stdout', data: 'out\n' },
      { content: 'err\n', stream: 'stderr', data: 'err\n' },
    ]);
  });

  it('finds stdout and stderr in detached logs, besides content', async () => {
    h.backend.declare('detached');
    const { id } = (await h.app.inject({ method: 'POST', url: '/sandboxes/sdk/exec/detach', payload: { command: ['echo'] } })).json().data;
    const logs = (await h.app.inject({ url: `/sandboxes/sdk/exec/detached/${id}/logs` })).json().data;
    expect(logs).toMatchObject({ stream: 'stdout', content: 'out\n', stdout: 'out\n', stderr: 'err\n' });
    const errs = (await h.app.inject({ url: `/sandboxes/sdk/exec/detached/${id}/logs?stream=stderr&offset=1` })).json().data;
    expect(errs).toMatchObject({ stream: 'stderr', content: 'rr\n', stdout: 'out\n', stderr: 'rr\n' });
  });

  it('writes a relative path of a single-file write under /workspace, and reads it back the same way', async () => {
    const put = await h.app.inject({ method: 'PUT', url: '/sandboxes/sdk/files/app/main.py', payload: { content: 'print(1)' } });
    expect(put.json().data).toBe('wrote 8 bytes to /workspace/app/main.py');
    expect((await h.app.inject({ url: '/sandboxes/sdk/files/app/main.py' })).json().data.content).toBe('print(1)');
    expect((await h.app.inject({ url: '/sandboxes/sdk/files/workspace/app/main.py' })).json().data.content).toBe('print(1)');
    expect((await h.app.inject({ method: 'DELETE', url: '/sandboxes/sdk/files/app/main.py' })).json().data).toBe('deleted /workspace/app/main.py');
    // A leading slash keeps a path absolute whatever its first directory.
    const absolute = await h.app.inject({ method: 'PUT', url: '/sandboxes/sdk/files//app/main.py', payload: { content: 'x' } });
    expect(absolute.json().data).toBe('wrote 1 bytes to /app/main.py');
  });
});
