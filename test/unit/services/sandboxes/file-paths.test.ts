import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
const call = (method: 'GET' | 'PUT' | 'POST' | 'DELETE', url: string, payload?: object) => h.app.inject({ method, url, ...(payload ? { payload } : {}) });
const written = async (url: string) => (await call('PUT', url, { content: 'x' })).json().data as string;

beforeEach(async () => {
  h = await fakeHarness();
  for (const name of ['vol', 'cache']) expect((await call('POST', '/volumes', { name })).statusCode).toBe(201);
  const created = await call('POST', '/sandboxes', { name: 'box', volumes: [{ name: 'vol', path: '/data' }, { name: 'cache', path: '/workspace/cache' }] });
  expect(created.statusCode, created.body).toBe(201);
});
afterEach(() => h.close());

describe('one rule for a path without a leading slash (docs/files-and-volumes.md, "Paths")', () => {
  it("is absolute when its first name is a volume's mount point", async () => {
    expect(await written('/sandboxes/box/files/data/v.txt')).toBe('wrote 1 bytes to /data/v.txt');
  });

  it('is absolute when its first name exists at the root, else under /workspace', async () => {
    expect(await written('/sandboxes/box/files/app/main.py')).toBe('wrote 1 bytes to /workspace/app/main.py');
    expect(await written('/sandboxes/box/files//app/seed')).toBe('wrote 1 bytes to /app/seed');
    // /app exists now: the same relative path names it.
    expect(await written('/sandboxes/box/files/app/main.py')).toBe('wrote 1 bytes to /app/main.py');
    expect(await written('/sandboxes/box/files/etc/app.conf')).toBe('wrote 1 bytes to /etc/app.conf');
    expect(await written('/sandboxes/box/files/main.py')).toBe('wrote 1 bytes to /workspace/main.py');
  });

  it('is the same in a several-files write, a read and a listing', async () => {
    const many = await call('POST', '/sandboxes/box/files', { files: { 'data/a.txt': 'a', 'b.txt': 'b' } });
    expect(many.statusCode).toBe(200);
    expect((await call('GET', '/sandboxes/box/files//data/a.txt')).json().data.content).toBe('a');
    expect((await call('GET', '/sandboxes/box/files//workspace/b.txt')).json().data.content).toBe('b');
    expect((await call('GET', '/sandboxes/box/files/data/a.txt')).json().data.content).toBe('a');
    expect((await call('GET', '/sandboxes/box/fs?path=data')).json().data.path).toBe('/data');
  });

  it('still refuses a system directory it resolves to', async () => {
    const response = await call('PUT', '/sandboxes/box/files/proc/x', { content: 'x' });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain("'/proc/x' is under /proc");
  });
});

describe('what a files call never removes', () => {
  beforeEach(async () => {
    await written('/sandboxes/box/files//tmp/keep/a');
    await written('/sandboxes/box/files//top/file');
  });

  const refused = async (path: string, words: string) => {
    const response = await call('DELETE', `/sandboxes/box/files/${path}`);
    expect(response.statusCode, path).toBe(400);
    expect(response.json().error).toContain(words);
  };

  it('refuses the root, top-level directories and mount points with a 400 naming the path, before touching anything', async () => {
    await refused('/', "'/' is the sandbox's root");
    await refused('/./', "'/' is the sandbox's root");
    await refused('tmp/.', "'/tmp' is a top-level directory");
    await refused('tmp', "'/tmp' is a top-level directory");
    await refused('/workspace', "'/workspace' is a top-level directory");
    await refused('data', "'/data' is where volume 'vol' is mounted");
    await refused('workspace/cache', "'/workspace/cache' is where volume 'cache' is mounted");
    expect((await call('GET', '/sandboxes/box/files//tmp/keep/a')).statusCode).toBe(200);
  });

  it('removes a top-level file and what is below a top-level directory', async () => {
    expect((await call('DELETE', '/sandboxes/box/files/tmp/keep/.')).json().data).toBe('deleted /tmp/keep');
    expect((await call('DELETE', '/sandboxes/box/files//top/file')).json().data).toBe('deleted /top/file');
  });
});
