import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { docker } from '../helpers/docker.js';

let rt: DockerRuntime;
const name = uniqueName('fs');
const volume = uniqueName('vol');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);
const exec = async (sandbox: string, command: string) => {
  const res = await api('POST', `/sandboxes/${sandbox}/exec`, { command: ['sh', '-c', command] });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { exit_code: number; stdout: string; stderr: string };
};

beforeAll(async () => {
  rt = await dockerRuntime();
  expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
});
afterAll(async () => {
  await rt?.dispose();
  // Volumes outlive the runtime's sandboxes: the ones made here go by their unique names.
  const mine = (await docker('volume', 'ls', '-q')).split('\n').filter((v) => v.endsWith(`-vol-${volume}`));
  if (mine.length > 0) await docker('volume', 'rm', '-f', ...mine);
});

/** The number of watches the sandbox's agent runs, asked over its socket on the host. */
async function agentWatches(sandbox: string): Promise<number> {
  const container = `sandboxd-${sandbox}-${(await uuidOf(sandbox)).slice(-8)}`;
  const binds = JSON.parse(await docker('inspect', '--format', '{{json .HostConfig.Binds}}', container)) as string[];
  const socketDir = binds.find((bind) => bind.endsWith(':/run/sandboxd'))!.split(':')[0]!;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath: `${socketDir}/agent.sock`, path: '/v1/fs/watches' }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve((JSON.parse(text) as { active: number }).active));
    });
    req.on('error', reject);
    req.end();
  });
}

async function uuidOf(sandbox: string): Promise<string> {
  return (await api('GET', `/sandboxes/${sandbox}`)).body.data.uuid as string;
}

/** An SSE reader over fetch: `next` resolves with the next event. */
async function watch(path: string, query = '') {
  const leave = new AbortController();
  const response = await fetch(`${rt.url}/sandboxes/${name}/fs/watch?path=${encodeURIComponent(path)}${query}`, { signal: leave.signal });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const next = async (timeoutMs = 1000): Promise<[string, Record<string, unknown>]> => {
    const deadline = Date.now() + timeoutMs;
    while (!text.includes('\n\n')) {
      const chunk = await Promise.race([reader.read(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no event within ${timeoutMs} ms`)), deadline - Date.now()))]);
      text += decoder.decode(chunk.value);
      text = text.replace(/^: heartbeat\n\n/, '');
    }
    const block = text.slice(0, text.indexOf('\n\n'));
    text = text.slice(text.indexOf('\n\n') + 2);
    return [/event: (.*)/.exec(block)![1]!, JSON.parse(/data: (.*)/.exec(block)![1]!)];
  };
  return { response, next, leave: () => leave.abort() };
}

describe('file system views', () => {
  it('lists a directory and stats paths as the sandbox user sees them', async () => {
    await exec(name, 'mkdir -p /workspace/list/sub && printf hello > /workspace/list/b.txt && chmod 640 /workspace/list/b.txt && ln -s b.txt /workspace/list/c');
    const listing = await api('GET', `/sandboxes/${name}/fs?path=/workspace/list`);
    expect(listing.status).toBe(200);
    expect(listing.body.data.path).toBe('/workspace/list');
    expect(listing.body.data.truncated).toBe(false);
    expect(listing.body.data.entries.map((e: { name: string; type: string }) => `${e.name}:${e.type}`)).toEqual(['b.txt:file', 'c:symlink', 'sub:dir']);
    expect(listing.body.data.entries[0]).toMatchObject({ size: 5, mode: '0640' });
    expect(Number.isNaN(Date.parse(listing.body.data.entries[0].mtime))).toBe(false);
    const stat = await api('GET', `/sandboxes/${name}/fs/stat?path=/workspace/list/b.txt`);
    expect(stat.body.data).toMatchObject({ path: '/workspace/list/b.txt', name: 'b.txt', type: 'file', size: 5 });
    expect((await api('GET', `/sandboxes/${name}/fs?path=/`)).body.data.entries.some((e: { name: string }) => e.name === 'workspace')).toBe(true);
  });

  it('answers 404 for a missing path, 400 for bad paths, 403 where the user may not look', async () => {
    expect((await api('GET', `/sandboxes/${name}/fs?path=/workspace/nope`)).status).toBe(404);
    expect((await api('GET', `/sandboxes/${name}/fs/stat?path=/workspace/nope`)).status).toBe(404);
    expect((await api('GET', `/sandboxes/${name}/fs?path=workspace`)).body.data.path).toBe('/workspace');
    expect((await api('GET', `/sandboxes/${name}/fs?path=/workspace/../etc`)).status).toBe(400);
    expect((await api('GET', `/sandboxes/${name}/fs?path=/etc/hostname`)).body.error).toContain('not a directory');
    expect((await api('GET', `/sandboxes/${name}/fs?path=/root`)).status).toBe(403);
    const directory = await api('GET', `/sandboxes/${name}/files/workspace/list`);
    expect(directory.body.error).toContain(`GET /sandboxes/${name}/fs?path=/workspace/list`);
  });

  it('watches: created, modified, deleted within a second; 404 before the stream; a client that leaves ends the agent watch', async () => {
    expect((await api('GET', `/sandboxes/${name}/fs/watch?path=/workspace/nope`)).status).toBe(404);
    await exec(name, 'mkdir -p /workspace/w');
    const w = await watch('/workspace/w');
    expect(w.response.status).toBe(200);
    expect(await w.next()).toEqual(['ready', { path: '/workspace/w', recursive: true }]);
    await exec(name, 'echo one > /workspace/w/a.txt');
    expect(await w.next()).toEqual(['created', { path: '/workspace/w/a.txt', type: 'file' }]);
    await exec(name, 'echo two >> /workspace/w/a.txt');
    expect(await w.next()).toEqual(['modified', { path: '/workspace/w/a.txt', type: 'file' }]);
    await exec(name, 'mkdir /workspace/w/sub');
    expect(await w.next()).toEqual(['created', { path: '/workspace/w/sub', type: 'dir' }]);
    await exec(name, 'touch /workspace/w/sub/deep');
    expect(await w.next()).toEqual(['created', { path: '/workspace/w/sub/deep', type: 'file' }]);
    await exec(name, 'rm /workspace/w/a.txt');
    expect(await w.next()).toEqual(['deleted', { path: '/workspace/w/a.txt', type: 'file' }]);
    expect(await agentWatches(name)).toBe(1);
    w.leave();
    await expect.poll(() => agentWatches(name), { timeout: 5000 }).toBe(0);
  });
});

describe('file system views in a restrictive (gVisor where available) sandbox', () => {
  it('lists and watches through the child-process path', async () => {
    const strict = uniqueName('fs-strict');
    expect((await api('POST', '/sandboxes', { name: strict, profile: 'restrictive' })).status).toBe(201);
    await exec(strict, 'mkdir -p /workspace/r && echo x > /workspace/r/a');
    const listing = await api('GET', `/sandboxes/${strict}/fs?path=/workspace/r`);
    expect(listing.body.data.entries.map((e: { name: string }) => e.name)).toEqual(['a']);
    const leave = new AbortController();
    const response = await fetch(`${rt.url}/sandboxes/${strict}/fs/watch?path=/workspace/r`, { signal: leave.signal });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let text = '';
    const until = async (wanted: string) => {
      const deadline = Date.now() + 3000;
      while (!text.includes(wanted) && Date.now() < deadline) text += new TextDecoder().decode((await reader.read()).value);
      expect(text).toContain(wanted);
    };
    await until('event: ready');
    await exec(strict, 'echo y > /workspace/r/b');
    await until('"path":"/workspace/r/b"');
    // Stopping the sandbox ends the watch: an `error` event, then the end of the stream.
    expect((await api('POST', `/sandboxes/${strict}/stop`)).status).toBe(200);
    await until('event: error');
    const deadline = Date.now() + 5000;
    let ended = false;
    while (!ended && Date.now() < deadline) ended = (await reader.read()).done;
    expect(ended).toBe(true);
    leave.abort();
    expect((await api('DELETE', `/sandboxes/${strict}`)).status).toBe(200);
  });
});

describe('volumes', () => {
  it('keep their data across the sandboxes that mount them; 409 on delete while mounted', async () => {
    const created = await api('POST', '/volumes', { name: volume });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: volume, in_use_by: [] });
    expect((await api('POST', '/volumes', { name: volume })).status).toBe(409);
    const first = uniqueName('v1');
    expect((await api('POST', '/sandboxes', { name: first, volumes: [{ name: volume, path: '/data' }] })).status).toBe(201);
    // The default user (not root) may write to a new volume; a second later, so that a creation
    // time read from the directory's modification time would move.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await exec(first, 'id -u; echo kept > /data/note && cat /data/note')).toMatchObject({ exit_code: 0, stdout: expect.stringContaining('kept') });
    expect((await api('GET', `/volumes/${volume}`)).body.data.in_use_by).toEqual([first]);
    // Its creation time stays when files are made at its top (the engine's is the directory's mtime).
    expect((await api('GET', `/volumes/${volume}`)).body.data.created_at).toBe(created.body.data.created_at);
    expect((await api('DELETE', `/volumes/${volume}`)).status).toBe(409);
    expect((await api('DELETE', `/sandboxes/${first}`)).status).toBe(200);
    const second = uniqueName('v2');
    // The agentkernel SDK's short form, name:/path:ro.
    expect((await api('POST', '/sandboxes', { name: second, volumes: [`${volume}:/workspace/mnt:ro`] })).status).toBe(201);
    expect(await exec(second, 'cat /workspace/mnt/note')).toMatchObject({ exit_code: 0, stdout: 'kept\n' });
    expect((await exec(second, 'echo x > /workspace/mnt/other')).exit_code).not.toBe(0);
    expect((await api('GET', `/sandboxes/${second}/fs?path=/workspace/mnt`)).body.data.entries.map((e: { name: string }) => e.name)).toEqual(['note']);
    expect((await api('DELETE', `/sandboxes/${second}`)).status).toBe(200);
    expect((await api('DELETE', `/volumes/${volume}`)).status).toBe(200);
    expect((await api('GET', `/volumes/${volume}`)).status).toBe(404);
  });

  it("a new volume's root is the sandbox user's, also in a restrictive sandbox (no CAP_CHOWN inside)", async () => {
    const shared = `${volume}-strict`;
    expect((await api('POST', '/volumes', { name: shared })).status).toBe(201);
    const strict = uniqueName('vol-strict');
    const made = await api('POST', '/sandboxes', { name: strict, profile: 'restrictive', volumes: [{ name: shared, path: '/data' }] });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const wrote = await api('POST', `/sandboxes/${strict}/exec`, { command: ['sh', '-c', 'echo kept > /data/note && stat -c %U /data && id -un'] });
    expect(wrote.body.data.exit_code, wrote.body.data.stderr).toBe(0);
    const [owner, user] = (wrote.body.data.stdout as string).trim().split('\n');
    expect(owner).toBe(user);
    expect((await api('DELETE', `/sandboxes/${strict}`)).status).toBe(200);
    expect((await api('DELETE', `/volumes/${shared}`)).status).toBe(200);
  });

  it('resolves data/v.txt to a volume at /data, and never removes the root, a top-level directory or a mount point', async () => {
    const paths = `${volume}-paths`;
    expect((await api('POST', '/volumes', { name: paths })).status).toBe(201);
    const box = uniqueName('vol-paths');
    expect((await api('POST', '/sandboxes', { name: box, volumes: [{ name: paths, path: '/data' }] })).status).toBe(201);
    expect((await api('PUT', `/sandboxes/${box}/files/data/v.txt`, { content: 'in the volume' })).body.data).toBe('wrote 13 bytes to /data/v.txt');
    expect(await exec(box, 'cat /data/v.txt; mkdir -p /tmp/dir/sub && touch /tmp/dir/sub/f /tmp/top')).toMatchObject({ exit_code: 0, stdout: 'in the volume' });
    for (const path of ['tmp/.', 'tmp', '/workspace', 'data', 'data/.', '/']) {
      const refused = await api('DELETE', `/sandboxes/${box}/files/${path}`);
      expect(refused.status, `${path}: ${JSON.stringify(refused.body)}`).toBe(400);
      expect(refused.body.error).toMatch(/is a top-level directory|is where volume|is the sandbox's root/);
    }
    expect(await exec(box, 'ls /tmp/dir/sub /data')).toMatchObject({ exit_code: 0, stdout: '/data:\nv.txt\n\n/tmp/dir/sub:\nf\n' });
    expect((await api('DELETE', `/sandboxes/${box}/files/tmp/dir/.`)).body.data).toBe('deleted /tmp/dir');
    expect((await exec(box, 'test -e /tmp/dir || echo gone')).stdout).toBe('gone\n');
    expect((await api('DELETE', `/sandboxes/${box}`)).status).toBe(200);
    expect((await api('DELETE', `/volumes/${paths}`)).status).toBe(200);
  });

  it('refuses bad mounts before anything is made', async () => {
    await api('POST', '/volumes', { name: volume });
    const refuse = async (volumes: object[]) => api('POST', '/sandboxes', { name: uniqueName('bad'), volumes });
    expect((await refuse([{ name: volume, path: '/etc' }])).status).toBe(400);
    expect((await refuse([{ name: volume, path: '/' }])).status).toBe(400);
    expect((await refuse([{ name: volume, path: '/a' }, { name: volume, path: '/b' }])).status).toBe(400);
    expect((await refuse([{ name: `${volume}-none`, path: '/a' }])).status).toBe(404);
    expect((await api('DELETE', `/volumes/${volume}`)).status).toBe(200);
  });
});
