import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readTar, tarArchive } from '../../../../src/images/tar-archive.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
beforeEach(async () => {
  h = await fakeHarness();
  await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 's' } });
  await h.app.inject({ method: 'POST', url: '/sandboxes/s/files', payload: { files: { '/workspace/src/a.py': 'print(1)', '/workspace/src/lib/b.py': 'x = 2' } } });
});
afterEach(() => h.close());

const TAR = { 'content-type': 'application/x-tar' };
const put = (url: string, payload: Buffer | string, headers: Record<string, string> = TAR) => h.app.inject({ method: 'PUT', url, payload, headers });
const log = async (): Promise<Array<Record<string, unknown>>> => (await h.app.inject({ method: 'GET', url: '/sandboxes/s/logs' })).json().data;
const events = async () => (await log()).map((entry) => entry.event);

describe('GET /sandboxes/{name}/archive', () => {
  it('answers a tar of what the directory holds, names relative to it, and records one copied entry', async () => {
    const response = await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=src' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('application/x-tar');
    const entries = await readTar(response.rawPayload);
    expect(entries.map((entry) => [entry.header.name, entry.content.toString()])).toEqual([
      ['a.py', 'print(1)'],
      ['lib/b.py', 'x = 2'],
    ]);
    expect((await log()).at(-1)).toMatchObject({ event: 'copied', path: '/workspace/src', direction: 'out' });
  });

  it('refuses a file, a missing directory, a path under /proc, .. and no path; 409 stopped, 422 without the capability', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=/workspace/src/a.py' })).json().error).toContain('not a directory');
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=/workspace/none' })).statusCode).toBe(404);
    const proc = await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=/proc/1' });
    expect([proc.statusCode, proc.json().error]).toEqual([400, "path: '/proc/1' is under /proc, which holds devices and kernel state; the files API packs directories of files"]);
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=/workspace/../etc' })).json().error).toContain("'..'");
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive' })).json().error).toContain('path');
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=/workspace&extra=1' })).statusCode).toBe(400);
    h.backend.omit('fileArchives');
    const unsupported = await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=src' });
    expect([unsupported.statusCode, unsupported.json().error]).toEqual([422, expect.stringContaining('directories packed and unpacked as tar archives')]);
    await h.app.inject({ method: 'POST', url: '/sandboxes/s/stop' });
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/archive?path=src' })).statusCode).toBe(409);
    expect(await events()).not.toContain('copied');
  });
});

describe('PUT /sandboxes/{name}/archive', () => {
  it('unpacks into the directory, answers what it wrote, and records one copied entry', async () => {
    const archive = await tarArchive([
      { type: 'dir', path: 'pkg', mode: 0o755 },
      { type: 'file', path: 'pkg/mod.py', mode: 0o644, content: Buffer.from('y = 3') },
      { type: 'file', path: 'top.txt', mode: 0o644, content: Buffer.from('hi') },
    ]);
    const response = await put('/sandboxes/s/archive?path=/workspace/dest', archive);
    expect(response.statusCode).toBe(200);
    expect(response.json().data).toEqual({ path: '/workspace/dest', entries: 2, bytes: 7 });
    expect((await log()).at(-1)).toMatchObject({ event: 'copied', path: '/workspace/dest', direction: 'in', entries: 2, bytes: 7 });
    expect((await events()).filter((event) => event === 'copied')).toHaveLength(1);
    const read = await h.app.inject({ method: 'GET', url: '/sandboxes/s/files/workspace/dest/pkg/mod.py' });
    expect(read.json().data.content).toBe('y = 3');
  });

  it('refuses names that leave the directory, a body that is not a tar, no body, JSON, a system path; writes nothing', async () => {
    const escape = await tarArchive([{ type: 'file', path: '../escaped', mode: 0o644, content: Buffer.from('x') }]);
    const refused = await put('/sandboxes/s/archive?path=/workspace/dest', escape);
    expect([refused.statusCode, refused.json().error]).toEqual([400, expect.stringContaining("archive entry '../escaped' is outside the directory")]);
    const garbage = await put('/sandboxes/s/archive?path=/workspace/dest', Buffer.alloc(700, 'x'));
    expect([garbage.statusCode, garbage.json().error]).toEqual([400, expect.stringContaining('not a tar archive')]);
    const empty = await put('/sandboxes/s/archive?path=/workspace/dest', Buffer.alloc(0));
    expect([empty.statusCode, empty.json().error]).toEqual([400, expect.stringContaining('a tar archive is required as the body')]);
    const json = await put('/sandboxes/s/archive?path=/workspace/dest', '{"a":1}', { 'content-type': 'application/json' });
    expect([json.statusCode, json.json().error]).toEqual([400, expect.stringContaining('Content-Type: application/x-tar')]);
    expect((await put('/sandboxes/s/archive?path=/workspace/dest', 'text', { 'content-type': 'text/plain' })).json().error).toBe('content-type: the body was sent as text/plain; send it with Content-Type: application/x-tar');
    expect((await put('/sandboxes/s/archive?path=/sys/kernel', escape)).json().error).toContain('under /sys');
    expect((await put('/sandboxes/s/archive?path=/workspace/a%00b', escape)).json().error).toContain('NUL');
    expect((await h.app.inject({ method: 'GET', url: '/sandboxes/s/fs?path=/workspace' })).json().data.entries.map((e: { name: string }) => e.name)).toEqual(['src']);
    expect(await events()).not.toContain('copied');
  });

  it('answers 413 past 64 MiB, naming the limit', async () => {
    const response = await put('/sandboxes/s/archive?path=/workspace/dest', Buffer.alloc(64 * 1024 * 1024 + 1));
    expect([response.statusCode, response.json().error]).toEqual([413, 'request body exceeds the 64 MiB limit']);
  });
});
