import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  h.backend.onExec = (request) => {
    if (request.command[0] === 'slow') return { hang: true };
    return { chunks: [{ stream: 'stdout', text: 'out\n' }, { stream: 'stderr', text: 'err\n' }], exit_code: 5 };
  };
});
afterEach(() => h.close());

/** The `event` and parsed `data` of each event of an SSE body. */
function events(body: string): [string, Record<string, unknown>][] {
  return body
    .split('\n\n')
    .filter((block) => block.includes('event: '))
    .map((block) => [/event: (.*)/.exec(block)![1]!, JSON.parse(/data: (.*)/.exec(block)![1]!) as Record<string, unknown>]);
}

describe('POST /sandboxes/{name}/exec/stream', () => {
  it('streams started, each output chunk with its stream, then done with the exit code', async () => {
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 's' } });
    const response = await h.app.inject({ method: 'POST', url: '/sandboxes/s/exec/stream', payload: { command: ['run'] } });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toContain('text/event-stream');
    const got = events(response.body);
    expect(got.map(([event]) => event)).toEqual(['started', 'output', 'output', 'done']);
    expect(got[0]![1]).toEqual({ sandbox: 's' });
    expect(got[1]![1]).toEqual({ content: 'out\n', stream: 'stdout' });
    expect(got[2]![1]).toEqual({ content: 'err\n', stream: 'stderr' });
    expect(got[3]![1]).toMatchObject({ exit_code: 5, timed_out: false, truncated: false });
    // Like a waited-for exec, it is in the audit log.
    const audit = (await h.app.inject({ method: 'GET', url: '/sandboxes/s/logs' })).json().data as { event: string }[];
    expect(audit.map((e) => e.event)).toContain('command_executed');
  });

  it('says timed_out in done when the command ran past timeout_ms', async () => {
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 't' } });
    const response = await h.app.inject({ method: 'POST', url: '/sandboxes/t/exec/stream', payload: { command: ['slow'], timeout_ms: 50 } });
    expect(events(response.body).at(-1)).toEqual(['done', expect.objectContaining({ exit_code: 124, timed_out: true })]);
  });

  it('answers an HTTP error before the stream opens: missing or stopped sandbox, bad body, refused sudo', async () => {
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'x' } });
    const missing = await h.app.inject({ method: 'POST', url: '/sandboxes/nope/exec/stream', payload: { command: ['true'] } });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toContain("'nope'");
    const sudo = await h.app.inject({ method: 'POST', url: '/sandboxes/x/exec/stream', payload: { command: ['id'], sudo: true } });
    expect(sudo.statusCode).toBe(403);
    const relative = await h.app.inject({ method: 'POST', url: '/sandboxes/x/exec/stream', payload: { command: ['ls'], workdir: 'tmp' } });
    expect(relative.statusCode).toBe(400);
    expect(relative.json().error).toMatch(/^workdir: /);
    const noCommand = await h.app.inject({ method: 'POST', url: '/sandboxes/x/exec/stream', payload: { command: [] } });
    expect(noCommand.statusCode).toBe(400);
    expect(noCommand.json().error).toMatch(/^command: /);
    await h.app.inject({ method: 'POST', url: '/sandboxes/x/stop' });
    const stopped = await h.app.inject({ method: 'POST', url: '/sandboxes/x/exec/stream', payload: { command: ['true'] } });
    expect(stopped.statusCode).toBe(409);
    expect(stopped.json()).toMatchObject({ code: 'CONFLICT', hint: { action: 'start', sandbox: 'x' } });
  });
});
