import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITY_NAMES, type Backend, type CapabilityName, type ExecRequest, type InstanceState, type SandboxSpec } from '../../src/backends/backend.js';
import { ServiceError, WorkerFailed } from '../../src/errors.js';
import { requireCapability } from '../../src/services/support/capabilities.js';
import { readTar, tarArchive } from '../../src/images/tar-archive.js';

/**
 * One conformance suite for every backend: each core operation, each capability the backend
 * declares, the UNSUPPORTED answer for each one it lacks, bad inputs, and list() as recovery
 * reads it. A test file per backend calls `backendConformance` with a subject; a case the
 * backend cannot run is skipped with the reason the subject gives.
 */
export interface ConformanceSubject {
  /** Shown in the suite's title. */
  title: string;
  /** Makes the backend under test; it is closed after the suite. */
  make(): Promise<Backend>;
  /** An image the backend has, whose default user may write /workspace and /tmp. */
  image: string;
  /** An image the backend cannot find or obtain. */
  missingImage: string;
  /** Turns a saved image's name into a tag the backend accepts (unique per run). */
  imageTag(name: string): string;
  /**
   * For `browserRelay`: an image with what the relay needs and python3 (to listen on the
   * loopback); a string instead says why the relay case cannot run here.
   */
  relayImage?: string | { skip: string };
  /** Removes whatever the run left behind (instances, images). */
  cleanup(backend: Backend): Promise<void>;
}

/**
 * The commands the suite runs. A real backend runs them in a shell; the fake is scripted to
 * answer them as that shell would (`answerLikeAShell` in fake.test.ts).
 */
export const COMMANDS = {
  /** Prints `stdout` and `stderr` (no newline added) and exits with `code`. */
  print: (stdout: string, stderr: string, code: number) => ['sh', '-c', 'printf %s "$1"; printf %s "$2" >&2; exit "$3"', 'print', stdout, stderr, String(code)],
  /** Copies stdin to stdout. */
  copyStdin: () => ['cat'],
  /** Prints one variable of its environment, with a newline. */
  printEnv: (name: string) => ['printenv', name],
  /** Runs until killed (or 30 s). */
  wait: () => ['sleep', '30'],
} as const;

/**
 * The worker the suite runs. A real backend runs it in sh; the fake is scripted to answer as it
 * would (`answerLikeTheWorker` in fake.test.ts). Each line is `NONCE REQUEST`, and REQUEST
 * `exit N` exits with N; `garbage` prints a line without the nonce; `hang` never answers;
 * `stderr TEXT` prints TEXT to stderr and answers `NONCE ok`; `env NAME` answers
 * `NONCE <its value>`; anything else answers `NONCE echo:REQUEST`.
 */
export const WORKER = [
  'sh',
  '-c',
  [
    'while IFS= read -r l; do',
    '  n=${l%% *}; r=${l#* }',
    '  case "$r" in',
    '    "exit "*) exit "${r#exit }" ;;',
    '    garbage) echo "not an answer" ;;',
    '    hang) sleep 30 ;;',
    `    "stderr "*) printf '%s\\n' "\${r#stderr }" >&2; echo "$n ok" ;;`,
    '    "env "*) echo "$n $(printenv "${r#env }")" ;;',
    `    *) printf '%s echo:%s\\n' "$n" "$r" ;;`,
    '  esac',
    'done',
  ].join('\n'),
];

/** The ServiceError code a promise rejects with, or 'resolved'. */
export const codeOf = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'resolved',
    (err: unknown) => (err instanceof ServiceError ? err.code : `not a ServiceError: ${String(err)}`),
  );

/** An id no instance has. */
const MISSING_ID = 'sandboxd-conformance-no-such-instance';

/** Defines the suite for one backend. */
export function backendConformance(subject: ConformanceSubject): void {
  describe(`backend conformance: ${subject.title}`, () => {
    let backend: Backend;
    /** A running instance shared by the exec and file cases. */
    let shared: InstanceState;
    const made: string[] = [];

    const specOf = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
      name: `conf-${randomBytes(3).toString('hex')}`,
      uuid: randomUUID(),
      image: subject.image,
      vcpus: 1,
      memory_mb: 256,
      profile: 'moderate',
      env: {},
      ...overrides,
    });
    const create = async (overrides: Partial<SandboxSpec> = {}) => {
      const state = await backend.create(specOf(overrides));
      made.push(state.id);
      return state;
    };
    const run = (id: string, command: readonly string[], extra: Partial<ExecRequest> = {}) =>
      backend.exec(id, { command: [...command], timeout_ms: 30_000, ...extra });
    const has = (name: CapabilityName) => backend?.capabilities[name] !== undefined;

    beforeAll(async () => {
      backend = await subject.make();
      await backend.ping();
      shared = await create({ env: { CONFORMANCE: 'from the spec' } });
    });
    afterAll(async () => {
      if (!backend) return;
      for (const id of made) await backend.remove(id).catch(() => undefined);
      await subject.cleanup(backend);
      await backend.close();
    });

    describe('core', () => {
      it('creates a running instance that inspect and list report with its name, uuid and role', async () => {
        const spec = specOf({ role: 'pool' });
        const state = await backend.create(spec);
        made.push(state.id);
        expect(state).toMatchObject({ name: spec.name, uuid: spec.uuid, role: 'pool', status: 'running' });
        expect(await backend.inspect(state.id)).toMatchObject({ id: state.id, uuid: spec.uuid, role: 'pool', status: 'running' });
        expect((await backend.list()).find((listed) => listed.id === state.id)).toMatchObject({ name: spec.name, uuid: spec.uuid, role: 'pool' });
      });

      it('stops, starts and removes idempotently; files survive a stop', async () => {
        const state = await create();
        await backend.writeFile(state.id, '/workspace/keep.txt', Buffer.from('kept'));
        await backend.stop(state.id);
        await backend.stop(state.id);
        expect(await backend.inspect(state.id)).toMatchObject({ status: 'stopped', ip: undefined });
        expect((await backend.list()).find((s) => s.id === state.id)?.status).toBe('stopped');
        expect(await codeOf(run(state.id, ['true']))).toBe('CONFLICT');

        expect(await backend.start(state.id)).toMatchObject({ id: state.id, status: 'running' });
        expect(await backend.start(state.id)).toMatchObject({ status: 'running' });
        expect((await backend.readFile(state.id, '/workspace/keep.txt')).toString()).toBe('kept');

        await backend.remove(state.id);
        await backend.remove(state.id);
        expect(await backend.inspect(state.id)).toBeNull();
        expect(await codeOf(backend.stop(state.id))).toBe('NOT_FOUND');
        expect(await codeOf(backend.start(state.id))).toBe('NOT_FOUND');
        expect(await codeOf(run(state.id, ['true']))).toBe('NOT_FOUND');
      });

      it('lists every instance it manages, running or stopped, with role and uuid, for recovery', async () => {
        const sandbox = await create();
        const pool = await create({ role: 'pool' });
        await backend.stop(sandbox.id);
        const listed = await backend.list();
        expect(listed.find((i) => i.id === sandbox.id)).toMatchObject({ uuid: sandbox.uuid, role: 'sandbox', status: 'stopped' });
        expect(listed.find((i) => i.id === pool.id)).toMatchObject({ uuid: pool.uuid, role: 'pool', status: 'running' });
        await backend.remove(pool.id);
        expect((await backend.list()).some((i) => i.id === pool.id)).toBe(false);
      });

      it('answers a missing image with IMAGE_UNAVAILABLE, leaving no instance', async () => {
        expect(await codeOf(backend.ensureImage(subject.missingImage))).toBe('IMAGE_UNAVAILABLE');
        const spec = specOf({ image: subject.missingImage });
        expect(await codeOf(backend.create(spec))).toBe('IMAGE_UNAVAILABLE');
        expect((await backend.list()).some((i) => i.uuid === spec.uuid)).toBe(false);
      });

      it('answers for a missing instance: inspect null, remove quietly, the rest NOT_FOUND', async () => {
        expect(await backend.inspect(MISSING_ID)).toBeNull();
        await backend.remove(MISSING_ID);
        expect(await codeOf(backend.start(MISSING_ID))).toBe('NOT_FOUND');
        expect(await codeOf(backend.stop(MISSING_ID))).toBe('NOT_FOUND');
        expect(await codeOf(run(MISSING_ID, ['true']))).toBe('NOT_FOUND');
        expect(await codeOf(backend.readFile(MISSING_ID, '/workspace/a.txt'))).toBe('NOT_FOUND');
        expect(await codeOf(backend.writeFile(MISSING_ID, '/workspace/a.txt', Buffer.from('a')))).toBe('NOT_FOUND');
        expect(await codeOf(backend.deleteFile(MISSING_ID, '/workspace/a.txt'))).toBe('NOT_FOUND');
      });
    });

    describe('exec', () => {
      it('returns the exit code with stdout and stderr apart, and both interleaved in output', async () => {
        const result = await run(shared.id, COMMANDS.print('out', 'err', 3));
        expect(result).toMatchObject({ exit_code: 3, stdout: 'out', stderr: 'err', timed_out: false, truncated: false });
        expect([...result.output].sort().join('')).toBe([...'outerr'].sort().join(''));
        expect(result.duration_ms).toBeGreaterThanOrEqual(0);
      });

      it('feeds stdin, and gives the spec env and the request env', async () => {
        expect((await run(shared.id, COMMANDS.copyStdin(), { stdin: Buffer.from('piped\n') })).stdout).toBe('piped\n');
        expect((await run(shared.id, COMMANDS.printEnv('CONFORMANCE'), { env: { CONFORMANCE: 'from the request' } })).stdout).toBe('from the request\n');
      });

      it('streams output to onOutput as it arrives', async () => {
        const chunks: string[] = [];
        await backend.exec(shared.id, { command: COMMANDS.print('a', 'b', 0), timeout_ms: 30_000 }, { onOutput: (chunk) => chunks.push(`${chunk.stream}:${chunk.data.toString()}`) });
        expect(chunks.sort()).toEqual(['stderr:b', 'stdout:a']);
      });

      it('cuts output at max_output_bytes and says so', async () => {
        const result = await run(shared.id, COMMANDS.print('x'.repeat(5000), '', 0), { max_output_bytes: 1000 });
        expect(result).toMatchObject({ exit_code: 0, truncated: true });
        expect(result.output.length).toBe(1000);
      });

      it('ends a command at its timeout, and on abort', async () => {
        const timed_out = await run(shared.id, COMMANDS.wait(), { timeout_ms: 500 });
        expect(timed_out).toMatchObject({ timed_out: true, exit_code: 124 });
        const controller = new AbortController();
        setTimeout(() => controller.abort(), 300);
        const aborted = await backend.exec(shared.id, { command: [...COMMANDS.wait()], timeout_ms: 30_000 }, { signal: controller.signal });
        expect(aborted.timed_out).toBe(false);
        expect(aborted.exit_code).not.toBe(0);
      });

      it('refuses an empty command', async () => {
        expect(await codeOf(run(shared.id, []))).toBe('BAD_REQUEST');
      });
    });

    describe('files', () => {
      it('round-trips bytes, creating parent directories', async () => {
        const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
        await backend.writeFile(shared.id, '/workspace/conf/deep/bytes.bin', every);
        expect(await backend.readFile(shared.id, '/workspace/conf/deep/bytes.bin')).toEqual(every);
        await backend.writeFile(shared.id, '/workspace/conf/deep/bytes.bin', Buffer.from('replaced'));
        expect((await backend.readFile(shared.id, '/workspace/conf/deep/bytes.bin')).toString()).toBe('replaced');
      });

      it('streams a file, with the same refusals before the first byte', async () => {
        const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
        await backend.writeFile(shared.id, '/workspace/streamed/bytes.bin', every);
        const chunks: Buffer[] = [];
        for await (const chunk of await backend.readFileStream(shared.id, '/workspace/streamed/bytes.bin')) chunks.push(Buffer.from(chunk as Uint8Array));
        expect(Buffer.concat(chunks)).toEqual(every);
        expect(await codeOf(backend.readFileStream(shared.id, '/workspace/streamed/nope.bin'))).toBe('NOT_FOUND');
        expect(await codeOf(backend.readFileStream(shared.id, '/workspace/streamed'))).toBe('BAD_REQUEST');
      });

      it('answers a missing file NOT_FOUND and a directory where a file is expected BAD_REQUEST', async () => {
        await backend.writeFile(shared.id, '/workspace/dir/inside.txt', Buffer.from('x'));
        expect(await codeOf(backend.readFile(shared.id, '/workspace/nope.txt'))).toBe('NOT_FOUND');
        expect(await codeOf(backend.deleteFile(shared.id, '/workspace/nope.txt'))).toBe('NOT_FOUND');
        expect(await codeOf(backend.readFile(shared.id, '/workspace/dir'))).toBe('BAD_REQUEST');
        expect(await codeOf(backend.writeFile(shared.id, '/workspace/dir/inside.txt/child', Buffer.from('x')))).toBe('BAD_REQUEST');
      });

      it('deletes a file, and a directory with everything in it', async () => {
        await backend.writeFile(shared.id, '/workspace/tree/x/y.txt', Buffer.from('y'));
        await backend.writeFile(shared.id, '/workspace/tree/z.txt', Buffer.from('z'));
        await backend.deleteFile(shared.id, '/workspace/tree/x/y.txt');
        expect(await codeOf(backend.readFile(shared.id, '/workspace/tree/x/y.txt'))).toBe('NOT_FOUND');
        await backend.deleteFile(shared.id, '/workspace/tree');
        expect(await codeOf(backend.readFile(shared.id, '/workspace/tree/z.txt'))).toBe('NOT_FOUND');
      });
    });

    describe('capabilities', () => {
      it('answers UNSUPPORTED naming the backend for each capability it lacks', () => {
        for (const name of CAPABILITY_NAMES.filter((n) => !has(n))) {
          let failure: unknown;
          try {
            requireCapability(backend, name);
          } catch (err) {
            failure = err;
          }
          expect(failure, name).toBeInstanceOf(ServiceError);
          expect(failure, name).toMatchObject({ code: 'UNSUPPORTED', message: expect.stringContaining(`'${backend.name}' backend`) });
        }
        for (const name of CAPABILITY_NAMES.filter(has)) expect(requireCapability(backend, name)).toBe(backend.capabilities[name]);
      });

      it('snapshots: keeps the files as an image that create starts from, listed until removed', async (context) => {
        if (!has('snapshots')) return context.skip('the backend does not declare snapshots');
        const snapshots = backend.capabilities.snapshots!;
        const source = await create();
        await backend.writeFile(source.id, '/workspace/snap.txt', Buffer.from('in the image'));
        const tag = subject.imageTag('snap');
        await snapshots.snapshot(source.id, tag, 'snapshot');
        expect(await snapshots.listImages()).toContain(tag);
        expect(await backend.inspect(source.id)).toMatchObject({ status: 'running' });
        const copy = await create({ image: tag });
        expect((await backend.readFile(copy.id, '/workspace/snap.txt')).toString()).toBe('in the image');
        await backend.remove(copy.id);
        await snapshots.removeImage(tag);
        await snapshots.removeImage(tag);
        expect(await snapshots.listImages()).not.toContain(tag);
        expect(await codeOf(snapshots.snapshot(MISSING_ID, subject.imageTag('none'), 'snapshot'))).toBe('NOT_FOUND');
      });

      it('archive: keeps the files as an image and removes the instance', async (context) => {
        if (!has('archive')) return context.skip('the backend does not declare archive');
        expect(has('snapshots'), 'an archive is a saved image: a backend that archives lists and removes them').toBe(true);
        const source = await create();
        await backend.writeFile(source.id, '/workspace/arch.txt', Buffer.from('archived'));
        const tag = subject.imageTag('arch');
        await backend.capabilities.archive!.archive(source.id, tag);
        expect(await backend.inspect(source.id)).toBeNull();
        expect(await backend.capabilities.snapshots!.listImages()).toContain(tag);
        const back = await create({ image: tag });
        expect((await backend.readFile(back.id, '/workspace/arch.txt')).toString()).toBe('archived');
        await backend.remove(back.id);
        await backend.capabilities.snapshots!.removeImage(tag);
        expect(await codeOf(backend.capabilities.archive!.archive(MISSING_ID, subject.imageTag('none')))).toBe('NOT_FOUND');
      });

      it('resize: changes the limits of a running instance in place', async (context) => {
        if (!has('resize')) return context.skip('the backend does not declare resize');
        const resize = backend.capabilities.resize!;
        await resize.resize(shared.id, { vcpus: 2, memory_mb: 384 });
        expect(await backend.inspect(shared.id)).toMatchObject({ status: 'running' });
        expect((await run(shared.id, COMMANDS.print('ok', '', 0))).stdout).toBe('ok');
        expect(await codeOf(resize.resize(MISSING_ID, { vcpus: 1 }))).toBe('NOT_FOUND');
      });

      it('poolClaim: makes a pool instance the sandbox of its uuid; refuses another uuid and a stopped one', async (context) => {
        if (!has('poolClaim')) return context.skip('the backend does not declare poolClaim');
        const claim = backend.capabilities.poolClaim!;
        const pooled = await create({ role: 'pool' });
        expect(await codeOf(claim.claim(pooled.id, specOf({ uuid: randomUUID() })))).toBe('BAD_REQUEST');
        await claim.claim(pooled.id, specOf({ uuid: pooled.uuid, vcpus: 1, memory_mb: 256 }));
        expect(await backend.inspect(pooled.id)).toMatchObject({ uuid: pooled.uuid, status: 'running' });
        expect((await run(pooled.id, COMMANDS.print('claimed', '', 0))).stdout).toBe('claimed');
        await backend.stop(pooled.id);
        expect(await codeOf(claim.claim(pooled.id, specOf({ uuid: pooled.uuid })))).toBe('CONFLICT');
      });

      it('reuse: brings a reusable instance back to how it was made; refuses any other instance', async (context) => {
        if (!has('reuse')) return context.skip('the backend does not declare reuse');
        const reuse = backend.capabilities.reuse!;
        const reusable = await create({ role: 'pool', reusable: true });
        await backend.writeFile(reusable.id, '/tmp/left-behind', Buffer.from('x'));
        await backend.writeFile(reusable.id, '/workspace/left-behind', Buffer.from('x'));
        await reuse.reset(reusable.id);
        expect(await codeOf(backend.readFile(reusable.id, '/tmp/left-behind'))).toBe('NOT_FOUND');
        expect(await codeOf(backend.readFile(reusable.id, '/workspace/left-behind'))).toBe('NOT_FOUND');
        expect((await run(reusable.id, COMMANDS.print('again', '', 0))).stdout).toBe('again');
        expect(await codeOf(reuse.reset(shared.id))).toBe('CONFLICT');
        expect(await codeOf(reuse.reset(MISSING_ID))).toMatch(/NOT_FOUND|CONFLICT/);
      });

      it('detached: runs commands past the call, with their status, logs and kill', async (context) => {
        if (!has('detached')) return context.skip('the backend does not declare detached');
        const detached = backend.capabilities.detached!;
        const printed = await detached.startDetached(shared.id, { command: COMMANDS.print('bg out', '', 0) });
        expect(printed).toMatchObject({ command: COMMANDS.print('bg out', '', 0) });
        await expect
          .poll(async () => (await detached.listDetached(shared.id)).find((p) => p.id === printed.id)?.status, { timeout: 10_000 })
          .toBe('completed');
        expect((await detached.detachedLogs(shared.id, printed.id, 'stdout')).content.toString()).toBe('bg out');

        const waiting = await detached.startDetached(shared.id, { command: [...COMMANDS.wait()] });
        expect((await detached.listDetached(shared.id)).find((p) => p.id === waiting.id)).toMatchObject({ status: 'running', exit_code: null });
        await detached.killDetached(shared.id, waiting.id);
        await expect
          .poll(async () => (await detached.listDetached(shared.id)).find((p) => p.id === waiting.id)?.status, { timeout: 10_000 })
          .toBe('killed');
        expect(await codeOf(detached.detachedLogs(shared.id, 'no-such-process', 'stdout'))).toBe('NOT_FOUND');
        expect(await codeOf(detached.killDetached(shared.id, 'no-such-process'))).toBe('NOT_FOUND');
      });

      it('fileViews: lists, stats and watches what the instance holds; refuses a missing path', async (context) => {
        if (!has('fileViews')) return context.skip('the backend does not declare fileViews');
        const views = backend.capabilities.fileViews!;
        const dir = `/workspace/views-${randomBytes(3).toString('hex')}`;
        await backend.writeFile(shared.id, `${dir}/b.txt`, Buffer.from('hello'));
        await backend.writeFile(shared.id, `${dir}/a/x`, Buffer.from('x'));
        const listing = await views.listDirectory(shared.id, dir);
        expect(listing).toMatchObject({ path: dir, truncated: false });
        expect(listing.entries.map((e) => [e.name, e.type])).toEqual([['a', 'dir'], ['b.txt', 'file']]);
        expect(await views.stat(shared.id, `${dir}/b.txt`)).toMatchObject({ name: 'b.txt', type: 'file', size: 5, mode: expect.stringMatching(/^0[0-7]{3}$/) });
        expect(await codeOf(views.stat(shared.id, `${dir}/none`))).toBe('NOT_FOUND');
        expect(await codeOf(views.listDirectory(shared.id, `${dir}/b.txt`))).toBe('BAD_REQUEST');
        expect(await codeOf(views.watch(shared.id, `${dir}/none`, { recursive: true, signal: new AbortController().signal }))).toBe('NOT_FOUND');
        const leave = new AbortController();
        const events = (await views.watch(shared.id, dir, { recursive: true, signal: leave.signal }))[Symbol.asyncIterator]();
        await backend.writeFile(shared.id, `${dir}/c.txt`, Buffer.from('c'));
        expect((await events.next()).value).toEqual({ event: 'created', path: `${dir}/c.txt`, type: 'file' });
        leave.abort();
        expect((await events.next()).done).toBe(true);
      });

      it('fileArchives: packs a directory and unpacks it elsewhere; refuses a file, a missing directory, an escaping name', async (context) => {
        if (!has('fileArchives')) return context.skip('the backend does not declare fileArchives');
        const archives = backend.capabilities.fileArchives!;
        const dir = `/workspace/packed-${randomBytes(3).toString('hex')}`;
        await backend.writeFile(shared.id, `${dir}/b.txt`, Buffer.from('hello'));
        await backend.writeFile(shared.id, `${dir}/a/x.bin`, Buffer.from([0, 1, 2]));
        const chunks: Buffer[] = [];
        for await (const chunk of await archives.packDirectory(shared.id, dir)) chunks.push(Buffer.from(chunk as Uint8Array));
        const packed = Buffer.concat(chunks);
        expect((await readTar(packed)).filter((e) => e.header.type === 'file').map((e) => [e.header.name, e.content.toString('hex')])).toEqual([['a/x.bin', '000102'], ['b.txt', '68656c6c6f']]);
        expect(await archives.unpackInto(shared.id, `${dir}-copy/in`, packed)).toMatchObject({ path: `${dir}-copy/in`, bytes: 8 });
        expect(await backend.readFile(shared.id, `${dir}-copy/in/a/x.bin`)).toEqual(Buffer.from([0, 1, 2]));
        expect(await codeOf(archives.packDirectory(shared.id, `${dir}/b.txt`))).toBe('BAD_REQUEST');
        expect(await codeOf(archives.packDirectory(shared.id, `${dir}/none`))).toBe('NOT_FOUND');
        const escaping = await tarArchive([{ type: 'file', path: '../escaped', mode: 0o644, content: Buffer.from('x') }]);
        expect(await codeOf(archives.unpackInto(shared.id, `${dir}-copy`, escaping))).toBe('BAD_REQUEST');
        expect(await codeOf(backend.readFile(shared.id, '/workspace/escaped'))).toBe('NOT_FOUND');
        expect(await codeOf(archives.unpackInto(shared.id, `${dir}-copy`, Buffer.alloc(600, 'x')))).toBe('BAD_REQUEST');
      });

      it('volumes: made, listed, inspected and removed; NOT_FOUND and CONFLICT where they apply', async (context) => {
        if (!has('volumes')) return context.skip('the backend does not declare volumes');
        const volumes = backend.capabilities.volumes!;
        const name = `conf-vol-${randomBytes(3).toString('hex')}`;
        try {
          expect(await volumes.inspectVolume(name)).toBeNull();
          expect(await volumes.createVolume(name)).toMatchObject({ name, created_at: expect.any(String) });
          expect((await volumes.listVolumes()).map((v) => v.name)).toContain(name);
          const user = await create({ volumes: [{ name, path: '/data' }] });
          await backend.writeFile(user.id, '/data/kept', Buffer.from('kept'));
          expect(await codeOf(volumes.removeVolume(name))).toBe('CONFLICT');
          await backend.remove(user.id);
          const next = await create({ volumes: [{ name, path: '/data', read_only: true }] });
          if (backend.name !== 'fake') expect((await backend.readFile(next.id, '/data/kept')).toString()).toBe('kept');
          await backend.remove(next.id);
          await volumes.removeVolume(name);
          expect(await volumes.inspectVolume(name)).toBeNull();
          expect(await codeOf(volumes.removeVolume(name))).toBe('NOT_FOUND');
        } finally {
          await volumes.removeVolume(name).catch(() => undefined);
        }
      });

      describe('workers', () => {
        const keyOf = (name: string) => `conf-${name}-${randomBytes(3).toString('hex')}`;
        let nonces = 0;
        /** One call to a worker: the request behind a fresh nonce; resolves with the reply and the nonce. */
        const call = async (id: string, key: string, request: string, timeout_ms = 30_000) => {
          const nonce = `nonce-${++nonces}`;
          const reply = await backend.capabilities.workers!.callWorker(id, key, { nonce, line: `${nonce} ${request}`, timeout_ms });
          return { ...reply, nonce };
        };
        const failureOf = (promise: Promise<unknown>) => promise.then(() => undefined, (err: unknown) => err as ServiceError);

        it('ensure starts a worker once per request, and another request replaces it', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const workers = backend.capabilities.workers!;
          const key = keyOf('ensure');
          const first = await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          expect(first).toMatchObject({ key, command: WORKER, started: true });
          expect(first.pid).toBeGreaterThan(0);
          expect(Number.isNaN(Date.parse(first.started_at))).toBe(false);
          const again = await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          expect(again).toMatchObject({ key, pid: first.pid, started: false, started_at: first.started_at });
          const replaced = await workers.ensureWorker(shared.id, key, { command: [...WORKER], env: { CONF_WORKER: 'replaced' } });
          expect(replaced.started).toBe(true);
          expect(replaced.pid).not.toBe(first.pid);
          const reply = await call(shared.id, key, 'env CONF_WORKER');
          expect(reply.line).toBe(`${reply.nonce} replaced`);
          await workers.stopWorker(shared.id, key);
        });

        it('a call round-trips one line, with what the worker printed to stderr meanwhile', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const key = keyOf('call');
          await backend.capabilities.workers!.ensureWorker(shared.id, key, { command: [...WORKER] });
          const echoed = await call(shared.id, key, 'hello, wörld ✓');
          expect(echoed).toMatchObject({ line: `${echoed.nonce} echo:hello, wörld ✓`, stderr: '' });
          expect(echoed.duration_ms).toBeGreaterThanOrEqual(0);
          const logged = await call(shared.id, key, 'stderr into the log');
          expect(logged).toMatchObject({ line: `${logged.nonce} ok`, stderr: 'into the log\n' });
          const next = await call(shared.id, key, 'quiet');
          expect(next).toMatchObject({ line: `${next.nonce} echo:quiet`, stderr: '' });
          await backend.capabilities.workers!.stopWorker(shared.id, key);
        });

        it('a call past its timeout fails TIMEOUT and stops the worker; the next ensure starts another', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const workers = backend.capabilities.workers!;
          const key = keyOf('timeout');
          const first = await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          expect(await codeOf(call(shared.id, key, 'hang', 500))).toBe('TIMEOUT');
          expect((await workers.listWorkers(shared.id)).some((worker) => worker.key === key)).toBe(false);
          expect(await codeOf(call(shared.id, key, 'after'))).toBe('NOT_FOUND');
          const second = await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          expect(second.started).toBe(true);
          expect(second.pid).not.toBe(first.pid);
          const reply = await call(shared.id, key, 'again');
          expect(reply.line).toBe(`${reply.nonce} echo:again`);
          await workers.stopWorker(shared.id, key);
        });

        it('garbage and an exit fail as WorkerFailed (METHOD_FAILED) and stop the worker', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const workers = backend.capabilities.workers!;
          const key = keyOf('fail');
          await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          const garbage = await failureOf(call(shared.id, key, 'garbage'));
          expect(garbage).toBeInstanceOf(WorkerFailed);
          expect(garbage).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'garbage', line: 'not an answer' } });
          expect(await codeOf(call(shared.id, key, 'after'))).toBe('NOT_FOUND');
          await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          const exited = await failureOf(call(shared.id, key, 'exit 3'));
          expect(exited).toBeInstanceOf(WorkerFailed);
          expect(exited).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'exited', exit_code: 3 } });
          expect(await codeOf(call(shared.id, key, 'after'))).toBe('NOT_FOUND');
        });

        it('lists and stops workers; a stopped or restarted instance runs none', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const workers = backend.capabilities.workers!;
          const state = await create();
          const [a, b] = [keyOf('a'), keyOf('b')];
          await workers.ensureWorker(state.id, a, { command: [...WORKER] });
          await workers.ensureWorker(state.id, b, { command: [...WORKER] });
          expect((await workers.listWorkers(state.id)).map((worker) => [worker.key, worker.started, worker.command])).toEqual(
            [a, b].sort().map((key) => [key, false, WORKER]),
          );
          await workers.stopWorker(state.id, a);
          await workers.stopWorker(state.id, a);
          expect((await workers.listWorkers(state.id)).map((worker) => worker.key)).toEqual([b]);
          expect(await codeOf(call(state.id, a, 'after'))).toBe('NOT_FOUND');
          await backend.stop(state.id);
          expect(await codeOf(workers.ensureWorker(state.id, a, { command: [...WORKER] }))).toBe('CONFLICT');
          expect(await codeOf(workers.listWorkers(state.id))).toBe('CONFLICT');
          await backend.start(state.id);
          expect(await workers.listWorkers(state.id)).toEqual([]);
          expect(await codeOf(call(state.id, b, 'after'))).toBe('NOT_FOUND');
        });

        it('refuses bad keys, commands and calls, and a missing instance', async (context) => {
          if (!has('workers')) return context.skip('the backend does not declare workers');
          const workers = backend.capabilities.workers!;
          const key = keyOf('bad');
          for (const bad of ['', '-dash', 'has space', 'a/b', 'k'.repeat(129)]) {
            expect(await codeOf(workers.ensureWorker(shared.id, bad, { command: [...WORKER] })), bad).toBe('BAD_REQUEST');
          }
          expect(await codeOf(workers.ensureWorker(shared.id, key, { command: [] }))).toBe('BAD_REQUEST');
          await workers.ensureWorker(shared.id, key, { command: [...WORKER] });
          const callWith = (nonce: string, line: string, timeout_ms = 30_000) => workers.callWorker(shared.id, key, { nonce, line, timeout_ms });
          expect(await codeOf(callWith('has space', 'x'))).toBe('BAD_REQUEST');
          expect(await codeOf(callWith('', 'x'))).toBe('BAD_REQUEST');
          expect(await codeOf(callWith('n', 'n one\nn two'))).toBe('BAD_REQUEST');
          expect(await codeOf(callWith('n', 'n x', 0))).toBe('BAD_REQUEST');
          expect(await codeOf(callWith('n', 'n x', 1.5))).toBe('BAD_REQUEST');
          // The refusals reached no worker: it still answers.
          expect((await call(shared.id, key, 'still here')).line).toMatch(/ echo:still here$/);
          expect(await codeOf(workers.ensureWorker(MISSING_ID, key, { command: [...WORKER] }))).toBe('NOT_FOUND');
          expect(await codeOf(call(MISSING_ID, key, 'x'))).toBe('NOT_FOUND');
          expect(await codeOf(workers.listWorkers(MISSING_ID))).toBe('NOT_FOUND');
          await workers.stopWorker(shared.id, key);
        });
      });

      it('ports: BAD_GATEWAY where nothing listens, NOT_FOUND for a missing instance, CONFLICT for a stopped one', async (context) => {
        if (!has('ports')) return context.skip('the backend does not declare ports');
        const ports = backend.capabilities.ports!;
        // Port 1 (tcpmux) listens nowhere: inside the instance for a real backend, on the host for the fake.
        expect(await codeOf(ports.connectPort(shared.id, 1))).toBe('BAD_GATEWAY');
        expect(await codeOf(ports.connectPort(MISSING_ID, 8000))).toBe('NOT_FOUND');
        const stopped = await create();
        await backend.stop(stopped.id);
        expect(await codeOf(ports.connectPort(stopped.id, 8000))).toBe('CONFLICT');
      });

      it('terminal: a shell on a terminal of the requested size, resized, with its exit code', async (context) => {
        if (!has('terminal')) return context.skip('the backend does not declare terminal');
        const terminals = backend.capabilities.terminal!;
        let output = '';
        const session = await terminals.openTerminal(shared.id, { cols: 91, rows: 21, env: { CONFORMANCE_PTY: 'set' }, onOutput: (data) => (output += data.toString()) });
        const until = async (text: string) => {
          for (let i = 0; i < 200 && !output.includes(text); i++) await new Promise((resolve) => setTimeout(resolve, 25));
          expect(output).toContain(text);
        };
        session.write(Buffer.from("stty size; echo $CONFORMANCE_PTY-$TERM; echo d''one\n"));
        await until('done');
        expect(output).toContain('21 91\r\nset-xterm-256color\r\n');
        session.resize(120, 30);
        session.write(Buffer.from('stty size\n'));
        await until('30 120\r\n');
        session.write(Buffer.from('exit 6\n'));
        expect(await session.exited).toBe(6);
        expect(await codeOf(terminals.openTerminal(MISSING_ID, { cols: 80, rows: 24, onOutput: () => {} }))).toBe('NOT_FOUND');
      });

      it('browserRelay: makes a port bound to the loopback reachable from the server', async (context) => {
        if (!has('browserRelay')) return context.skip('the backend does not declare browserRelay');
        if (typeof subject.relayImage !== 'string') return context.skip(subject.relayImage?.skip ?? 'the subject names no image for the relay');
        const relay = backend.capabilities.browserRelay!;
        const state = await create({ image: subject.relayImage });
        const listen = "setsid python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & sleep 1";
        expect((await run(state.id, ['bash', '-c', listen], { keep_background: true })).exit_code).toBe(0);
        const url = await relay.relay(state.id, 8000);
        expect((await fetch(url)).status).toBe(200);
        expect(await relay.relay(state.id, 8000)).toBe(url);
        expect(await codeOf(relay.relay(MISSING_ID, 8000))).toBe('NOT_FOUND');
      });
    });
  });
}
