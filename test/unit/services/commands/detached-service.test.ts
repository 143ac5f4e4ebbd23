import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;

beforeEach(async () => {
  h = await fakeHarness();
  h.backend.declare('detached');
  h.backend.onExec = (request) =>
    request.command[0] === 'hang' ? { hang: true } : { chunks: [{ stream: 'stdout', text: 'out\n' }, { stream: 'stderr', text: 'err\n' }], exit_code: 3 };
  expect((await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'dt' } })).statusCode).toBe(201);
});
afterEach(() => h.close());

const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) => {
  const response = await h.app.inject({ method, url, ...(payload ? { payload } : {}) });
  return { status: response.statusCode, body: response.json() as any };
};
const detach = async (command: string[]) => (await call('POST', '/sandboxes/dt/exec/detach', { command })).body.data;
const backendId = async () => (await h.services.sandboxes.require('dt')).backend_id!;

describe('detached commands across a stop and start', () => {
  it('keep the status, exit code, end time and output of a command that had ended', async () => {
    const { id } = await detach(['sh', '-c', 'exit 3']);
    expect((await call('POST', '/sandboxes/dt/stop')).status).toBe(200);
    // A stopped sandbox still answers with what was kept.
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}`)).body.data).toMatchObject({ id, status: 'failed', exit_code: 3 });
    expect((await call('POST', '/sandboxes/dt/start')).status).toBe(200);
    const after = (await call('GET', `/sandboxes/dt/exec/detached/${id}`)).body.data;
    expect(after).toMatchObject({ id, status: 'failed', exit_code: 3 });
    expect(after.finished_at).toEqual(expect.any(String));
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}/logs`)).body.data).toMatchObject({ content: 'out\n', offset: 0, next_offset: 4, status: 'failed' });
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}/logs?stream=stderr`)).body.data.content).toBe('err\n');
  });

  it('reports a command still running at the stop as lost, with the output it had printed', async () => {
    const { id } = await detach(['hang']);
    const process = (await h.backend.listDetached(await backendId()))[0]!;
    h.backend.finishDetached(await backendId(), process.id, 0, { stdout: 'partial' });
    // The first has ended before the stop; this one still runs through it.
    const { id: running } = await detach(['hang']);
    await call('POST', '/sandboxes/dt/stop');
    await call('POST', '/sandboxes/dt/start');
    const listed = (await call('GET', '/sandboxes/dt/exec/detached')).body.data;
    expect(listed.map((d: any) => [d.id, d.status, d.exit_code])).toEqual([
      [id, 'completed', 0],
      [running, 'lost', null],
    ]);
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}/logs`)).body.data.content).toBe('partial');
  });

  it('reports a command its sandbox no longer knows (restarted without a stop through the service) as lost', async () => {
    const { id } = await detach(['hang']);
    await h.backend.stop(await backendId());
    await h.backend.start(await backendId());
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}`)).body.data).toMatchObject({ status: 'lost', exit_code: null });
  });

  it('reports a killed command as killed, also after a stop', async () => {
    const { id } = await detach(['hang']);
    expect((await call('DELETE', `/sandboxes/dt/exec/detached/${id}`)).body.data).toMatchObject({ status: 'killed', exit_code: 137 });
    await call('POST', '/sandboxes/dt/stop');
    await call('POST', '/sandboxes/dt/start');
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}`)).body.data).toMatchObject({ status: 'killed', exit_code: 137 });
  });

  it('reads logs from an offset, and past the end reads nothing', async () => {
    const { id } = await detach(['sh']);
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}/logs?offset=2`)).body.data).toMatchObject({ content: 't\n', offset: 2, next_offset: 4 });
    expect((await call('GET', `/sandboxes/dt/exec/detached/${id}/logs?offset=99`)).body.data).toMatchObject({ content: '', offset: 99, next_offset: 99 });
    const bad = await call('GET', `/sandboxes/dt/exec/detached/${id}/logs?offset=-1`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('offset');
  });

  it('follows a log as Server-Sent Events until the command ends', async () => {
    const { id } = await detach(['hang']);
    const process = (await h.backend.listDetached(await backendId()))[0]!;
    // The command ends while the client follows: the stream sends what it printed, then done.
    const followed = h.app.inject({ method: 'GET', url: `/sandboxes/dt/exec/detached/${id}/logs?follow=true` });
    setImmediate(() => void backendId().then((bid) => h.backend.finishDetached(bid, process.id, 0, { stdout: 'line\n' })));
    const response = await followed;
    expect(response.headers['content-type']).toContain('text/event-stream');
    const events = response.body
      .split('\n\n')
      .filter((block) => block.startsWith('id:'))
      .map((block) => ({ event: /event: (.*)/.exec(block)![1], data: JSON.parse(/data: (.*)/.exec(block)![1]!) }));
    expect(events.map((e) => e.event)).toEqual(['output', 'done']);
    expect(events[0]!.data).toEqual({ data: 'line\n', stream: 'stdout', offset: 0 });
    expect(events[1]!.data).toMatchObject({ status: 'completed', exit_code: 0, next_offset: 5 });
  });
});
