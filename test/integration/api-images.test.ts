import Dockerode from 'dockerode';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tarArchive } from '../helpers/tar-archive.js';
import { BASE_IMAGE, call, dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';
import { runCli } from '../helpers/server-process.js';

/**
 * Images from a Dockerfile on the real engine: a good build and a sandbox from it, a failing RUN
 * (400 with the log; nothing left), the context limit (413), delete while used (409), the SSE
 * stream, a tar context, and the bad inputs. Every image is named after this run and removed.
 */

let rt: DockerRuntime;
const docker = new Dockerode();
const run = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
const names: string[] = [];
const nameOf = (what: string) => {
  const name = `t${run}-${what}`;
  names.push(name);
  return name;
};
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);
/** This server's tag of its built image `name` (each deployment builds under its own id). */
const tagOf = (name: string) => `sandboxd-user/${rt.deploymentId}/${name}:latest`;
const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');
const exists = (inspect: () => Promise<unknown>) => inspect().then(
  () => true,
  () => false,
);

/** The ids of the images and containers a build log names (` ---> id`, `Running in id`). */
function loggedIds(log: string): { images: string[]; containers: string[] } {
  return {
    images: [...log.matchAll(/^ ---> ([0-9a-f]{12})\s*$/gm)].map((m) => m[1]!),
    containers: [...log.matchAll(/^ ---> Running in ([0-9a-f]{12})\s*$/gm)].map((m) => m[1]!),
  };
}

/** Reads a Server-Sent Events response to its end: [event, data] pairs. */
async function sse(path: string, body: unknown): Promise<Array<[string, any]>> {
  const response = await fetch(rt.url + path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(body) });
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((block) => block.includes('data:'))
    .map((block) => [/^event: (.*)$/m.exec(block)![1]!, JSON.parse(/^data: (.*)$/m.exec(block)![1]!)]);
}

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
});

afterAll(async () => {
  await rt.dispose();
  for (const name of names) await docker.getImage(tagOf(name)).remove().catch(() => undefined);
});

describe('images from a Dockerfile', () => {
  it('builds one, lists it, runs a sandbox from it, refuses to delete it while used, then deletes it', async () => {
    const name = nameOf('good');
    // Steps run as the base image's user (sandbox): root for the ones that write outside its home.
    const dockerfile = `FROM ${BASE_IMAGE}\nUSER root\nCOPY app/hello.txt /opt/hello.txt\nRUN echo "built in $(cut -c1-2 /etc/debian_version)" > /opt/built\nUSER sandbox\n`;
    const built = await api('POST', '/images', { name, dockerfile, files: { 'app/hello.txt': b64('hello from the context\n') } });
    expect(built.status, JSON.stringify(built.body)).toBe(201);
    const tag = tagOf(name);
    expect(built.body.data).toEqual({ name, tag, id: expect.stringMatching(/^sha256:/), size_bytes: expect.any(Number) });

    const listed = (await api('GET', '/images')).body.data as { name: string; kind: string; tag: string; present: boolean }[];
    expect(listed).toContainEqual(expect.objectContaining({ name, kind: 'built', tag, present: true }));
    expect(listed).toContainEqual(expect.objectContaining({ name: 'base', kind: 'catalog', tag: BASE_IMAGE, present: true }));

    const box = `img-${run}`;
    const made = await api('POST', '/sandboxes', { name: box, image: tag });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const out = await api('POST', `/sandboxes/${box}/exec`, { command: ['sh', '-c', 'cat /opt/hello.txt /opt/built; id -un'] });
    expect(out.body.data.stdout).toBe('hello from the context\nbuilt in 12\nsandbox\n');

    const refused = await api('DELETE', `/images/${name}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain(`used by sandbox ${box}`);
    await api('DELETE', `/sandboxes/${box}`);
    // A fast run leaves an idle instance of the image in the run pool: the delete lets it go.
    const ran = await api('POST', '/run', { image: tag, command: ['cat', '/opt/hello.txt'] });
    expect(ran.body.data?.stdout, JSON.stringify(ran.body)).toBe('hello from the context\n');
    const imageId = built.body.data.id as string;
    const deleted = await api('DELETE', `/images/${name}`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body.data).toEqual({ deleted: true, name, tag });
    expect(await exists(() => docker.getImage(tag).inspect())).toBe(false);
    expect(await docker.listContainers({ all: true, filters: JSON.stringify({ ancestor: [imageId] }) })).toEqual([]);
    expect(((await api('GET', '/images')).body.data as { name: string }[]).map((i) => i.name)).not.toContain(name);
    expect((await api('DELETE', `/images/${name}`)).status).toBe(404);
  });

  it('a failing RUN is a 400 whose log says why, and leaves no image or container', async () => {
    const name = nameOf('fails');
    const dockerfile = `FROM ${BASE_IMAGE}\nCOPY note.txt /opt/note.txt\nRUN echo "about to fail" && ls /no/such/dir\nRUN echo never\n`;
    const failed = await api('POST', '/images', { name, dockerfile, files: { 'note.txt': b64('note') } });
    expect(failed.status).toBe(400);
    expect(failed.body.error).toMatch(/the image build failed: .*returned a non-zero code: 2/);
    const log = failed.body.details.log as string;
    expect(log).toContain('about to fail');
    expect(log).toContain("cannot access '/no/such/dir'");
    expect(log).not.toContain('never\n');
    const ids = loggedIds(log);
    // The base image's id, the build label's step and the COPY step's; their containers and the failing step's.
    expect(ids.images.length).toBe(3);
    expect(ids.containers.length).toBe(2);
    for (const id of ids.images.slice(1)) expect(await exists(() => docker.getImage(id).inspect())).toBe(false);
    expect(await exists(() => docker.getImage(ids.images[0]!).inspect())).toBe(true);
    for (const id of ids.containers) expect(await exists(() => docker.getContainer(id).inspect())).toBe(false);
    expect(await exists(() => docker.getImage(tagOf(name)).inspect())).toBe(false);
  });

  it('streams the log as Server-Sent Events: log, then done; or error with the log', async () => {
    const name = nameOf('stream');
    const events = await sse('/images', { name, dockerfile: `FROM ${BASE_IMAGE}\nRUN echo streamed-step-output\n` });
    const kinds = events.map(([event]) => event);
    expect(kinds.at(-1)).toBe('done');
    expect(kinds.slice(0, -1).every((k) => k === 'log')).toBe(true);
    expect(events.map(([, data]) => data.content ?? '').join('')).toContain('streamed-step-output');
    expect(events.at(-1)![1]).toEqual({ name, tag: tagOf(name), id: expect.stringMatching(/^sha256:/), size_bytes: expect.any(Number) });

    const broken = await sse('/images', { name: nameOf('stream-fails'), dockerfile: `FROM ${BASE_IMAGE}\nRUN echo before-the-fall && exit 7\n` });
    const [event, data] = broken.at(-1)!;
    expect(event).toBe('error');
    expect(data.message).toContain('returned a non-zero code: 7');
    expect(data.log).toContain('before-the-fall');
  });

  it('a client that leaves a streamed build stops it, and nothing of it stays', async () => {
    const name = nameOf('left');
    const leave = new AbortController();
    const response = await fetch(`${rt.url}/images`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ name, dockerfile: `FROM ${BASE_IMAGE}\nRUN echo made-${run} > /tmp/made\nRUN echo long-step-$((1 + 1)) && sleep 120\n` }),
      signal: leave.signal,
    });
    let log = '';
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    while (!log.includes('long-step-2')) log += (await reader.read()).value ?? '';
    leave.abort();
    // The log so far names the steps' containers (the build label's, then RUN's) and the images the steps before made.
    const containers = [...log.matchAll(/Running in ([0-9a-f]{12})/g)].map((m) => m[1]!);
    const images = [...log.matchAll(/ ---> ([0-9a-f]{12})\\n/g)].map((m) => m[1]!);
    expect(containers.length).toBe(3);
    expect(images.length).toBe(3);
    // The build's clean-up goes on after the client left: its step containers, then the images
    // its steps made (not the base image, images[0]), newest first.
    const left = async () => {
      const found = await Promise.all([
        ...containers.map((id) => exists(() => docker.getContainer(id).inspect())),
        ...images.slice(1).map((id) => exists(() => docker.getImage(id).inspect())),
      ]);
      return [...containers, ...images.slice(1)].filter((_, i) => found[i]);
    };
    await expect.poll(left, { timeout: 30_000 }).toEqual([]);
    expect(await exists(() => docker.getImage(tagOf(name)).inspect())).toBe(false);
  });

  it('takes a tar context (its Dockerfile, or one given beside it)', async () => {
    const name = nameOf('tar');
    const context = await tarArchive([
      { type: 'file', path: 'Dockerfile', mode: 0o644, content: Buffer.from(`FROM ${BASE_IMAGE}\nCOPY deep/ /opt/deep/\n`) },
      { type: 'file', path: 'deep/file.txt', mode: 0o644, content: Buffer.from('from the tar\n') },
    ]);
    const built = await api('POST', '/images', { name, context: b64(context) });
    expect(built.status, JSON.stringify(built.body)).toBe(201);
    const replaced = await api('POST', '/images', { name, context: b64(context), dockerfile: `FROM ${BASE_IMAGE}\nCOPY deep/file.txt /opt/only.txt\n`, files: { 'extra.txt': b64('x') } });
    expect(replaced.status, JSON.stringify(replaced.body)).toBe(201);
    expect(replaced.body.data.id).not.toBe(built.body.data.id);
    // The rebuild took the tag; the old image went with it.
    expect(await exists(() => docker.getImage(built.body.data.id).inspect())).toBe(false);
    const box = `tar-${run}`;
    expect((await api('POST', '/sandboxes', { name: box, image: tagOf(name) })).status).toBe(201);
    expect((await api('POST', `/sandboxes/${box}/exec`, { command: ['cat', '/opt/only.txt'] })).body.data.stdout).toBe('from the tar\n');
    await api('DELETE', `/sandboxes/${box}`);
  });

  it('sandboxd images build --file Dockerfile DIR: the log on stderr, the tag on stdout, modes kept, then images list and rm; a failure exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-context-'));
    try {
      mkdirSync(join(dir, 'sub'));
      writeFileSync(join(dir, 'sub', 'a.txt'), 'in a subfolder\n');
      writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho script-ran-in-build\n');
      chmodSync(join(dir, 'run.sh'), 0o755);
      writeFileSync(join(dir, 'Dockerfile'), `FROM ${BASE_IMAGE}\nUSER root\nCOPY . /opt/ctx/\nRUN /opt/ctx/run.sh\nUSER sandbox\n`);
      const name = nameOf('cli');
      const built = await runCli(['images', 'build', '--file', join(dir, 'Dockerfile'), dir, '--name', name, '--server', rt.url]);
      expect(built.code, built.stderr).toBe(0);
      expect(built.stdout).toBe(`${tagOf(name)}\n`);
      expect(built.stderr).toContain('script-ran-in-build');
      const box = `cli-${run}`;
      expect((await api('POST', '/sandboxes', { name: box, image: tagOf(name) })).status).toBe(201);
      expect((await api('POST', `/sandboxes/${box}/exec`, { command: ['cat', '/opt/ctx/sub/a.txt'] })).body.data.stdout).toBe('in a subfolder\n');
      await api('DELETE', `/sandboxes/${box}`);

      // images list shows it beside the catalog: name, kind, tag, id, size, age.
      const listed = await runCli(['images', 'list', '--server', rt.url]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout.split('\n')[0]!.split(/ {2,}/)).toEqual(['NAME', 'KIND', 'TAG', 'STATUS', 'ID', 'SIZE', 'CREATED']);
      const row = listed.stdout.split('\n').find((line) => line.startsWith(`${name} `))?.split(/ {2,}/);
      expect(row).toEqual([name, 'built', tagOf(name), 'present', expect.stringMatching(/^[0-9a-f]{12}$/), expect.stringMatching(/^\d+(\.\d)? MiB$/), expect.stringMatching(/ ago$/)]);
      expect(listed.stdout).toMatch(/^base +catalog +sandboxd\/base:bookworm +present /m);
      const images = JSON.parse((await runCli(['--json', 'images', 'ls', '--server', rt.url])).stdout) as unknown[];
      expect(images).toContainEqual({ name, tag: tagOf(name), kind: 'built', present: true, id: expect.stringMatching(/^sha256:/), size_bytes: expect.any(Number), created_at: expect.any(String), description: null });
      expect(await runCli(['images', 'rm', name, '--server', rt.url])).toEqual({ code: 0, stdout: `${name}\n`, stderr: '' });
      expect(await exists(() => docker.getImage(tagOf(name)).inspect())).toBe(false);

      writeFileSync(join(dir, 'Dockerfile'), `FROM ${BASE_IMAGE}\nRUN echo cli-failure && false\n`);
      const failed = await runCli(['images', 'build', '-f', join(dir, 'Dockerfile'), dir, '--name', nameOf('cli-fails'), '--server', rt.url]);
      expect(failed.code).toBe(1);
      expect(failed.stdout).toBe('');
      expect(failed.stderr).toContain('cli-failure');
      expect(failed.stderr).toMatch(/error: the image build failed: .*non-zero code: 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a context over 64 MiB (413) and bad input (400), building nothing', async () => {
    // 64 MiB of file and its tar headers: just over; its base64 still fits the route's body limit.
    const big = await api('POST', '/images', { name: nameOf('big'), dockerfile: `FROM ${BASE_IMAGE}\n`, files: { 'blob.bin': Buffer.alloc(64 * 1024 * 1024, 1).toString('base64') } });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatch(/^the build context is 671\d{5} bytes, over the limit of 67108864 \(64 MiB\)$/);

    const cases: Array<[unknown, RegExp]> = [
      [{ name: 'Bad_Name', dockerfile: `FROM ${BASE_IMAGE}\n` }, /name/],
      [{ name: nameOf('nofrom'), dockerfile: 'FROM sandboxd/nothing-here:1\n' }, /FROM sandboxd\/nothing-here:1: no such image on this engine, and builds pull nothing/],
      [{ name: nameOf('arg'), dockerfile: 'ARG BASE=x\nFROM $BASE\n' }, /^dockerfile: line 2: FROM x: no such image on this engine/],
      [{ name: nameOf('badref'), dockerfile: 'FROM Not..An/Image\n' }, /FROM Not\.\.An\/Image: /],
      [{ name: nameOf('escape'), dockerfile: `FROM ${BASE_IMAGE}\n`, files: { '../outside': b64('x') } }, /files\['..\/outside'\]: must be a relative path/],
      [{ name: nameOf('nodockerfile') }, /dockerfile: required/],
      [{ name: nameOf('notar'), context: b64('not a tar at all') }, /context: not a tar archive/],
    ];
    for (const [body, message] of cases) {
      const refused = await api('POST', '/images', body);
      expect(refused.status, JSON.stringify(body).slice(0, 100)).toBe(400);
      expect(refused.body.error).toMatch(message);
    }
    for (const name of names.filter((n) => /big|nofrom|arg|badref|escape|nodockerfile|notar/.test(n))) {
      expect(await exists(() => docker.getImage(tagOf(name)).inspect())).toBe(false);
    }
  });
});
