import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 's' } });
  await h.app.inject({ method: 'POST', url: '/sandboxes/s/files', payload: { files: { '/workspace/b.txt': 'hello', '/workspace/a/x.py': 'x' } } });
});
afterEach(() => h.close());

const get = (url: string) => h.app.inject({ method: 'GET', url });

describe('GET /sandboxes/{name}/fs', () => {
  it('lists a directory sorted by name with type, size, mode and mtime', async () => {
    const response = await get('/sandboxes/s/fs?path=/workspace');
    expect(response.statusCode).toBe(200);
    const listing = response.json().data;
    expect(listing).toMatchObject({ path: '/workspace', truncated: false });
    expect(listing.entries).toEqual([
      { name: 'a', type: 'dir', size: 0, mode: '0755', mtime: expect.any(String) },
      { name: 'b.txt', type: 'file', size: 5, mode: '0644', mtime: expect.any(String) },
    ]);
  });

  it('stats a path, 404 for a missing one', async () => {
    const response = await get('/sandboxes/s/fs/stat?path=/workspace/b.txt');
    expect(response.json().data).toMatchObject({ path: '/workspace/b.txt', name: 'b.txt', type: 'file', size: 5 });
    const missing = await get('/sandboxes/s/fs/stat?path=/workspace/nope');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toContain('/workspace/nope');
    expect((await get('/sandboxes/s/fs?path=/workspace/nope')).statusCode).toBe(404);
  });

  it('resolves a relative path as the files routes do; refuses invalid paths, a listing of a file, a missing path query', async () => {
    expect((await get('/sandboxes/s/fs?path=workspace')).json().data.path).toBe('/workspace');
    expect((await get('/sandboxes/s/fs?path=/')).json().data.path).toBe('/');
    expect((await get('/sandboxes/s/fs?path=//workspace/./')).json().data.path).toBe('/workspace');
    expect((await get('/sandboxes/s/fs?path=/workspace/../etc')).statusCode).toBe(400);
    expect((await get('/sandboxes/s/fs/stat?path=/a%00b')).statusCode).toBe(400);
    expect((await get('/sandboxes/s/fs?path=/workspace/b.txt')).json().error).toContain('not a directory');
    expect((await get('/sandboxes/s/fs')).statusCode).toBe(400);
    expect((await get('/sandboxes/nope/fs?path=/workspace')).statusCode).toBe(404);
  });

  it('answers 409 for a stopped sandbox', async () => {
    await h.app.inject({ method: 'POST', url: '/sandboxes/s/stop' });
    expect((await get('/sandboxes/s/fs?path=/workspace')).statusCode).toBe(409);
    expect((await get('/sandboxes/s/fs/watch?path=/workspace')).statusCode).toBe(409);
  });

  it('answers 422 where the backend has no file views', async () => {
    h.backend.omit('fileViews');
    expect((await get('/sandboxes/s/fs?path=/workspace')).statusCode).toBe(422);
  });

  it('points a read of a directory to the listing', async () => {
    const response = await get('/sandboxes/s/files/workspace/a');
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toBe("'/workspace/a' is a directory: list it with GET /sandboxes/s/fs?path=/workspace/a");
  });
});

describe('GET /sandboxes/{name}/fs/watch', () => {
  it('404 for a missing path before the stream starts', async () => {
    const response = await get('/sandboxes/s/fs/watch?path=/workspace/nope');
    expect(response.statusCode).toBe(404);
    expect(response.headers['content-type']).toContain('application/json');
  });

  it('streams ready, then created, modified and deleted; a client that leaves ends the watch', async () => {
    const url = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const leave = new AbortController();
    const response = await fetch(`${url}/sandboxes/s/fs/watch?path=/workspace`, { signal: leave.signal });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const next = async (): Promise<[string, unknown]> => {
      while (!text.includes('\n\n')) text += decoder.decode((await reader.read()).value);
      const block = text.slice(0, text.indexOf('\n\n'));
      text = text.slice(text.indexOf('\n\n') + 2);
      return [/event: (.*)/.exec(block)![1]!, JSON.parse(/data: (.*)/.exec(block)![1]!)];
    };
    expect(await next()).toEqual(['ready', { path: '/workspace', recursive: true }]);
    await h.app.inject({ method: 'PUT', url: '/sandboxes/s/files/workspace/new.txt', payload: { content: '1' } });
    expect(await next()).toEqual(['created', { path: '/workspace/new.txt', type: 'file' }]);
    await h.app.inject({ method: 'PUT', url: '/sandboxes/s/files/workspace/new.txt', payload: { content: '2' } });
    expect(await next()).toEqual(['modified', { path: '/workspace/new.txt', type: 'file' }]);
    await h.app.inject({ method: 'DELETE', url: '/sandboxes/s/files/workspace/new.txt' });
    expect(await next()).toEqual(['deleted', { path: '/workspace/new.txt', type: 'file' }]);
    expect(h.backend.watches.active).toBe(1);
    leave.abort();
    await expect.poll(() => h.backend.watches.active).toBe(0);
  });
});
