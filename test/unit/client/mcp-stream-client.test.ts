import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { httpClient } from '../../../src/client/http-client.js';
import { SseReader } from '../../../src/client/sse-reader.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  h.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'a\n' }, { stream: 'stderr', text: 'b\n' }], exit_code: 0 });
  await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 's' } });
});
afterEach(() => h.close());

describe('the remote MCP client reads event streams as they arrive', () => {
  it('hands on each event, and throws the refusal of a request refused before its stream', async () => {
    const api = httpClient(await h.app.listen({ host: '127.0.0.1', port: 0 }));
    const events: [string, unknown][] = [];
    await api.stream({ method: 'POST', path: '/sandboxes/s/exec/stream', body: { command: ['x'] } }, (event, data) => events.push([event, data]));
    expect(events.map(([event]) => event)).toEqual(['started', 'output', 'output', 'done']);
    expect(events[1]![1]).toEqual({ content: 'a\n', stream: 'stdout' });
    await expect(api.stream({ method: 'POST', path: '/sandboxes/nope/exec/stream', body: { command: ['x'] } }, () => undefined)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('parses events split anywhere and skips comments', () => {
    const got: [string, unknown][] = [];
    const reader = new SseReader((event, data) => got.push([event, data]));
    for (const piece of [': heartbeat\n\nid: 1\nevent: out', 'put\ndata: {"a":1}\n', '\nid: 2\nevent: done\ndata: {}\n\n']) reader.push(piece);
    expect(got).toEqual([['output', { a: 1 }], ['done', {}]]);
  });
});
