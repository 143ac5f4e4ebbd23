import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecRequest, InstanceState, Profile } from '../../src/backends/backend.js';
import { defaultRuntimeDir } from '../../src/backends/docker/agent-sockets.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { ServiceError } from '../../src/errors.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { docker, removeInstanceContainers, sandboxSpec, uniqueName } from '../helpers/docker.js';
import { BUSYBOX_IMAGE, GHOST_USER_IMAGE, MUSL_IMAGE, MUSL_USER, ensureMinimalImage } from '../helpers/minimal-images.js';

/**
 * The agent in images that are not Debian (test/helpers/minimal-images.ts): a bare static
 * busybox (no libc, no /etc/passwd, root, no /workspace) and an Alpine-like musl image with a
 * non-root USER, under runc (moderate) and gVisor (restrictive), through the DockerBackend.
 */
const instanceId = uniqueName('itest-images');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-images-'));
const backend = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });

const run = (id: string, command: string[], extra: Partial<ExecRequest> = {}) => backend.exec(id, { command, timeout_ms: 30_000, ...extra });
const sh = (id: string, script: string, extra: Partial<ExecRequest> = {}) => run(id, ['sh', '-c', script], extra);

/** The ServiceError code a promise rejects with. */
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (err: unknown) => (err instanceof ServiceError ? err.code : `not a ServiceError: ${String(err)}`),
  );

/** Command lines of every process in the sandbox but PID 1 and the listing itself. */
const processes = async (id: string) => (await sh(id, 'ps -o args | busybox tail -n +3')).stdout;

/** POST /v1/files?op=mkdir straight to the agent (the backend has no mkdir) over the host-side socket link. */
function agentMkdir(uuid: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({
      socketPath: join(defaultRuntimeDir(dataDir), instanceId, `${uuid}.sock`),
      method: 'POST',
      path: `/v1/files?op=mkdir&path=${encodeURIComponent(path)}`,
    });
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
    req.end();
  });
}

interface ImageCase {
  image: string;
  what: string;
  /** The default user as the sandbox sees it. */
  user: { uid: number; gid: number; home: string };
}

const IMAGES: ImageCase[] = [
  // Its default user is root: commands without sudo run as nobody.
  { image: BUSYBOX_IMAGE, what: 'static busybox, no libc, no /etc/passwd, no /workspace', user: { uid: 65534, gid: 65534, home: '/' } },
  { image: MUSL_IMAGE, what: `musl + busybox, USER ${MUSL_USER.name}`, user: { uid: MUSL_USER.uid, gid: MUSL_USER.gid, home: MUSL_USER.home } },
];
const PROFILES: Profile[] = ['moderate', 'restrictive'];

beforeAll(async () => {
  for (const image of [BUSYBOX_IMAGE, MUSL_IMAGE, GHOST_USER_IMAGE]) await ensureMinimalImage(image);
  await backend.ping();
});

afterAll(async () => {
  await removeInstanceContainers(instanceId);
  for (const tag of await backend.listImages()) await backend.removeImage(tag);
  await backend.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe.each(IMAGES.flatMap((c) => PROFILES.map((profile) => ({ ...c, profile }))))(
  '$image ($what), $profile',
  ({ image, user, profile }) => {
    let sandbox: InstanceState;

    beforeAll(async () => {
      sandbox = await backend.create(sandboxSpec({ image, profile, env: { FROM_SPEC: 'spec value' } }));
    });
    afterAll(async () => {
      await backend.remove(sandbox.id);
    });

    it('serves exec from the agent as PID 1, under gVisor in the restrictive profile', async () => {
      expect(sandbox.runtime).toBe(profile === 'restrictive' ? 'runsc' : 'runc');
      expect((await run(sandbox.id, ['cat', '/proc/1/cmdline'])).stdout.split('\0')[0]).toBe('/.sandboxd/agent');
      if (image === MUSL_IMAGE) {
        const loader = await run(sandbox.id, ['/lib/ld-musl-x86_64.so.1']);
        expect(loader.stderr).toContain('musl libc (x86_64)');
      }
    });

    it('runs commands: exit codes, stdout/stderr in order, stdin, env, workdir', async () => {
      const ordered = await sh(sandbox.id, 'echo out1; sleep 0.05; echo err1 >&2; sleep 0.05; echo out2; exit 3');
      expect(ordered).toMatchObject({ exit_code: 3, stdout: 'out1\nout2\n', stderr: 'err1\n', output: 'out1\nerr1\nout2\n', timed_out: false });
      expect((await run(sandbox.id, ['cat'], { stdin: Buffer.from('piped\nin\n') })).stdout).toBe('piped\nin\n');
      const env = await sh(sandbox.id, 'echo "$FROM_SPEC|$FROM_REQUEST|$HOME"', { env: { FROM_REQUEST: 'request value' } });
      expect(env.stdout).toBe(`spec value|request value|${user.home}\n`);
      expect((await run(sandbox.id, ['pwd'])).stdout).toBe('/workspace\n');
      expect((await run(sandbox.id, ['pwd'], { workdir: '/tmp' })).stdout).toBe('/tmp\n');
      const missingDir = await run(sandbox.id, ['pwd'], { workdir: '/no/such/dir' });
      expect(missingDir).toMatchObject({ exit_code: 126, stderr: expect.stringContaining('working directory /no/such/dir: no such file') });
      const missing = await run(sandbox.id, ['no-such-command']);
      expect(missing).toMatchObject({ exit_code: 127, stderr: expect.stringContaining('no-such-command: command not found') });
    });

    it('runs as the default user, as root on request, and names an unknown user', async () => {
      expect((await run(sandbox.id, ['id', '-u'])).stdout).toBe(`${user.uid}\n`);
      expect((await run(sandbox.id, ['id', '-g'])).stdout).toBe(`${user.gid}\n`);
      expect((await run(sandbox.id, ['id', '-u'], { user: 'root' })).stdout).toBe('0\n');
      const ghost = await run(sandbox.id, ['true'], { user: 'ghost' });
      expect(ghost).toMatchObject({ exit_code: 126, stderr: expect.stringContaining('unknown user "ghost"') });
    });

    it('kills the whole process tree on a timeout and keeps the partial output', async () => {
      const started = Date.now();
      const result = await sh(sandbox.id, 'echo started; sleep 31 & sleep 32; echo never', { timeout_ms: 500 });
      expect(result).toMatchObject({ exit_code: 124, timed_out: true, stdout: 'started\n' });
      expect(Date.now() - started).toBeLessThan(5_000);
      const asRoot = await sh(sandbox.id, 'echo root; sleep 33 & sleep 34', { timeout_ms: 300, user: 'root' });
      expect(asRoot).toMatchObject({ exit_code: 124, stdout: 'root\n' });
      await expect.poll(() => processes(sandbox.id), { timeout: 3_000 }).not.toMatch(/sleep 3[1-4]/);
    });

    it('reads, writes, deletes files and makes directories, as the default user', async () => {
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      await backend.writeFile(sandbox.id, '/workspace/deep/er/blob.bin', bytes);
      expect(await backend.readFile(sandbox.id, '/workspace/deep/er/blob.bin')).toEqual(bytes);
      expect((await run(sandbox.id, ['stat', '-c', '%u:%g', '/workspace', '/workspace/deep/er/blob.bin'])).stdout).toBe(
        `${user.uid}:${user.gid}\n`.repeat(2),
      );
      expect(await codeOf(backend.readFile(sandbox.id, '/workspace/missing.txt'))).toBe('NOT_FOUND');
      expect(await codeOf(backend.readFile(sandbox.id, '/workspace/deep'))).toBe('BAD_REQUEST');
      expect(await codeOf(backend.writeFile(sandbox.id, '/workspace/deep/er/blob.bin/under', bytes))).toBe('BAD_REQUEST');
      await backend.deleteFile(sandbox.id, '/workspace/deep');
      expect(await codeOf(backend.deleteFile(sandbox.id, '/workspace/deep'))).toBe('NOT_FOUND');
      expect(await agentMkdir(sandbox.uuid, '/workspace/made/here')).toBe(200);
      expect((await run(sandbox.id, ['stat', '-c', '%F %u', '/workspace/made/here'])).stdout).toBe(`directory ${user.uid}\n`);
      // Outside the workspace: the kernel decides, as the default user.
      const system = await codeOf(backend.writeFile(sandbox.id, '/usr/x', bytes));
      expect(system).toBe(profile === 'restrictive' || user.uid !== 0 ? 'FORBIDDEN' : 'resolved');
    });

    it('runs detached commands, keeps their exit and output, and kills their tree', async () => {
      const done = await backend.startDetached(sandbox.id, { command: ['sh', '-c', 'echo out; echo err >&2; id -u; exit 4'], user: 'root' });
      await expect.poll(async () => (await backend.listDetached(sandbox.id)).find((p) => p.id === done.id)?.status).toBe('failed');
      expect((await backend.listDetached(sandbox.id)).find((p) => p.id === done.id)?.exit_code).toBe(4);
      expect((await backend.detachedLogs(sandbox.id, done.id, 'stdout')).content.toString()).toBe('out\n0\n');
      expect((await backend.detachedLogs(sandbox.id, done.id, 'stderr')).content.toString()).toBe('err\n');

      const server = await backend.startDetached(sandbox.id, { command: ['sh', '-c', 'sleep 35 & sleep 36'], workdir: '/tmp' });
      expect(server.status).toBe('running');
      await expect.poll(() => processes(sandbox.id)).toContain('sleep 35');
      await backend.killDetached(sandbox.id, server.id);
      await expect.poll(async () => (await backend.listDetached(sandbox.id)).find((p) => p.id === server.id)?.status).toBe('killed');
      await expect.poll(() => processes(sandbox.id), { timeout: 3_000 }).not.toMatch(/sleep 3[56]/);
    });
  },
);

describe('an image whose default user is not in its /etc/passwd', () => {
  it.each(PROFILES)('is refused at create in the %s profile, leaving no container', async (profile) => {
    const spec = sandboxSpec({ image: GHOST_USER_IMAGE, profile });
    const err = await backend.create(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/default user 'ghost'/) });
    expect((await backend.list()).some((s) => s.name === spec.name)).toBe(false);
  });
});

describe('a busybox sandbox without a shell or any applet', () => {
  let sandbox: InstanceState;

  beforeAll(async () => {
    sandbox = await backend.create(sandboxSpec({ image: BUSYBOX_IMAGE }));
    // Every applet link goes, /bin/sh first; only the busybox binary itself stays.
    const strip = 'for f in $(busybox --list-full); do [ "$f" = bin/busybox ] || busybox rm -f "/$f"; done';
    await run(sandbox.id, ['busybox', 'sh', '-c', strip], { user: 'root' });
  });
  afterAll(async () => {
    await backend.remove(sandbox.id);
  });

  it('still runs commands, files, timeouts and detached commands: none goes through a shell', async () => {
    expect(await run(sandbox.id, ['sh', '-c', 'true'])).toMatchObject({ exit_code: 127, stderr: expect.stringContaining('sh: command not found') });
    expect((await run(sandbox.id, ['busybox', 'echo', 'still here'])).stdout).toBe('still here\n');
    await backend.writeFile(sandbox.id, '/workspace/a/b.txt', Buffer.from('no shell needed'));
    expect((await backend.readFile(sandbox.id, '/workspace/a/b.txt')).toString()).toBe('no shell needed');
    await backend.deleteFile(sandbox.id, '/workspace/a');
    expect(await codeOf(backend.readFile(sandbox.id, '/workspace/a/b.txt'))).toBe('NOT_FOUND');
    expect(await run(sandbox.id, ['busybox', 'sleep', '37'], { timeout_ms: 300 })).toMatchObject({ exit_code: 124, timed_out: true });
    const detached = await backend.startDetached(sandbox.id, { command: ['busybox', 'sleep', '38'] });
    await backend.killDetached(sandbox.id, detached.id);
    await expect.poll(async () => (await backend.listDetached(sandbox.id))[0]?.status).toBe('killed');
    const left = await run(sandbox.id, ['busybox', 'ps', '-o', 'args']);
    expect(left.stdout).not.toMatch(/sleep 3[78]/);
  });

  it('snapshots as it is; under gVisor, a tmpfs /workspace needs tar, and its absence is UNSUPPORTED', async () => {
    const bare = `sandboxd-itest-${instanceId}:bare`;
    await backend.snapshot(sandbox.id, bare, 'snapshot');
    const restrictive = await backend.create(sandboxSpec({ image: bare, profile: 'restrictive' }));
    await backend.writeFile(restrictive.id, '/workspace/x.txt', Buffer.from('x'));
    const err = await backend.snapshot(restrictive.id, `sandboxd-itest-${instanceId}:never`, 'snapshot').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNSUPPORTED', message: expect.stringContaining('whose image has no tar') });
    await backend.remove(restrictive.id);
  });
});

describe('the Engine API fallback (a container without the agent) in minimal images', () => {
  it.each([BUSYBOX_IMAGE, MUSL_IMAGE])('runs commands and files in %s, root included', async (image) => {
    const id = await docker(
      'run', '-d', '--label', 'sandboxd.managed=true', '--label', `sandboxd.instance=${instanceId}`,
      '--label', `sandboxd.uuid=${uniqueName('old')}`, '--label', 'sandboxd.name=old', image, 'sleep', '3600',
    );
    try {
      const uid = image === MUSL_IMAGE ? MUSL_USER.uid : 0;
      expect((await run(id, ['id', '-u'])).stdout).toBe(`${uid}\n`);
      expect((await run(id, ['id', '-u'], { user: 'root' })).stdout).toBe('0\n');
      await backend.writeFile(id, '/tmp/old/x.txt', Buffer.from('through the engine'));
      expect((await backend.readFile(id, '/tmp/old/x.txt')).toString()).toBe('through the engine');
      await backend.deleteFile(id, '/tmp/old');
      expect(await codeOf(backend.readFile(id, '/tmp/old/x.txt'))).toBe('NOT_FOUND');
      const slow = await sh(id, 'echo begun; sleep 39', { timeout_ms: 500 });
      expect(slow).toMatchObject({ exit_code: 124, stdout: 'begun\n' });
      await expect.poll(async () => (await run(id, ['ps', '-o', 'args'])).stdout, { timeout: 3_000 }).not.toContain('sleep 39');
    } finally {
      await backend.remove(id);
    }
  });
});

describe('snapshots of a gVisor sandbox (tmpfs /workspace) in minimal images', () => {
  it.each([BUSYBOX_IMAGE, MUSL_IMAGE])('carry /workspace through busybox tar in %s', async (image) => {
    const source = await backend.create(sandboxSpec({ image, profile: 'restrictive' }));
    await backend.writeFile(source.id, '/workspace/kept/file.txt', Buffer.from('kept'));
    const tag = `sandboxd-itest-${instanceId}:${image === MUSL_IMAGE ? 'musl' : 'busybox'}`;
    await backend.snapshot(source.id, tag, 'snapshot');
    await backend.remove(source.id);
    const copy = await backend.create(sandboxSpec({ image: tag, profile: 'restrictive' }));
    expect((await backend.readFile(copy.id, '/workspace/kept/file.txt')).toString()).toBe('kept');
    // busybox's default user is root: its sandboxes, and their snapshots, run commands as nobody.
    const uid = image === MUSL_IMAGE ? MUSL_USER.uid : 65534;
    expect((await run(copy.id, ['id', '-u'])).stdout).toBe(`${uid}\n`);
    await backend.remove(copy.id);
  });
});
