import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capabilityNames, type ExecRequest, type InstanceState, type OutputChunk } from '../../src/backends/backend.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { agentBinary, defaultRuntimeDir } from '../../src/backends/docker/agent-sockets.js';
import { ServiceError } from '../../src/errors.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { ROOT_IMAGE, docker, ensureTestImage, sandboxSpec, removeInstanceContainers, uniqueName } from '../helpers/docker.js';

const instanceId = uniqueName('itest');
const PIDS_LIMIT = 256;
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-backend-'));
const backend = new DockerBackend({
  instanceId,
  dataDir,
  logger: silentLogger(),
  pidsLimit: PIDS_LIMIT,
  imageHint: (image) => `build it with \`sandboxd images build ${image}\``,
  // The git fixture serves on loopback, which a source_url reaches only when allowed.
  sourceAllowedHosts: ['127.0.0.1'],
  // sandboxd's networks and packet-filter chains of this file's own, removed at the end.
  networkName: `b${randomBytes(4).toString('hex')}`,
});

const specOf = sandboxSpec;

const run = (id: string, command: string[], extra: Partial<ExecRequest> = {}) =>
  backend.exec(id, { command, timeout_ms: 60_000, ...extra });
const sh = (id: string, script: string, extra: Partial<ExecRequest> = {}) => run(id, ['sh', '-c', script], extra);

/** The ServiceError code a promise rejects with. */
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (err: unknown) => (err instanceof ServiceError ? err.code : `not a ServiceError: ${String(err)}`),
  );

const inspectJson = async (id: string) => JSON.parse(await docker('inspect', id))[0];

/** Bounding capability set of a process in the sandbox, as a bigint mask. */
async function capBnd(id: string): Promise<bigint> {
  const status = (await run(id, ['cat', '/proc/self/status'])).stdout;
  return BigInt(`0x${/CapBnd:\s*([0-9a-f]+)/.exec(status)![1]}`);
}
/** Permitted and effective capability sets of a command run as `user`. */
async function capSets(id: string, user?: string): Promise<{ prm: bigint; eff: bigint }> {
  const status = (await run(id, ['cat', '/proc/self/status'], user ? { user } : {})).stdout;
  const mask = (name: string) => BigInt(`0x${new RegExp(`${name}:\\s*([0-9a-f]+)`).exec(status)![1]}`);
  return { prm: mask('CapPrm'), eff: mask('CapEff') };
}
/** The restrictive profile's bounding set: what the agent needs, never held by a command. */
const AGENT_CAPS = (1n << 5n) | (1n << 6n) | (1n << 7n);
const CAP_NET_RAW = 1n << 13n;
const CAP_SYS_ADMIN = 1n << 21n;
const CAP_MKNOD = 1n << 27n;
const CAP_AUDIT_WRITE = 1n << 29n;

/** Owner uid of a path, through python: coreutils' `stat` uses statx, which this gVisor rejects. */
const ownerOf = async (id: string, path: string) =>
  (await run(id, ['python3', '-c', 'import os,sys; print(os.stat(sys.argv[1]).st_uid)', path])).stdout.trim();

/** prctl(PR_GET_NO_NEW_PRIVS) in the sandbox; gVisor's /proc/self/status lacks the NoNewPrivs line. */
const noNewPrivs = async (id: string) =>
  (await run(id, ['python3', '-c', 'import ctypes; print(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'])).stdout.trim();

/** Command lines of every process in the sandbox. */
const processes = async (id: string) =>
  (await sh(id, 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done')).stdout;

let moderate: InstanceState;
let restrictive: InstanceState;
let permissive: InstanceState;

beforeAll(async () => {
  await ensureTestImage();
  await backend.ping();
  process.env.SANDBOXD_TEST_MARKER = 'must-not-leak';
  [moderate, restrictive, permissive] = await Promise.all([
    backend.create(specOf({ env: { GREETING: 'hello from spec' } })),
    backend.create(specOf({ profile: 'restrictive' })),
    backend.create(specOf({ profile: 'permissive' })),
  ]);
});

afterAll(async () => {
  delete process.env.SANDBOXD_TEST_MARKER;
  await removeInstanceContainers(instanceId);
  await backend.egress.teardown();
  await backend.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('lifecycle', () => {
  it('reports its runtimes once it has reached the engine', () => {
    expect(backend.name).toBe('docker');
    expect(capabilityNames(backend)).toEqual(expect.arrayContaining(['snapshots', 'resize', 'archive', 'browserRelay']));
    expect(backend.runtimes()).toEqual(expect.arrayContaining(['runc', 'runsc']));
  });

  it('creates a labelled, named, running container', async () => {
    const spec = specOf({ role: 'pool', replica: 'replica-1' });
    const state = await backend.create(spec);
    expect(state).toMatchObject({ name: spec.name, uuid: spec.uuid, role: 'pool', replica: 'replica-1', status: 'running', runtime: 'runc' });
    expect((await backend.list()).find((listed) => listed.id === state.id)).toMatchObject({ role: 'pool', replica: 'replica-1' });
    expect(state.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const info = await inspectJson(state.id);
    expect(info.Name).toBe(`/sandboxd-${spec.name}-${spec.uuid.slice(-8)}`);
    expect(info.Config.Labels).toMatchObject({
      'sandboxd.managed': 'true',
      'sandboxd.instance': instanceId,
      'sandboxd.name': spec.name,
      'sandboxd.uuid': spec.uuid,
      'sandboxd.role': 'pool',
      'sandboxd.replica': 'replica-1',
    });
    // The agent is PID 1 and reaps; it runs as root to run commands as the default user.
    expect(info.HostConfig.Init).toBeFalsy();
    expect(info.Config.Entrypoint).toEqual(['/.sandboxd/agent', 'serve', '--socket', '/run/sandboxd/agent.sock', '--user', 'sandbox', '--workspace', '/workspace']);
    expect(info.Config.User).toBe('0');
    await backend.remove(state.id);
  });

  it("lists only this instance's containers, running or not", async () => {
    const listed = await backend.list();
    expect(listed.map((s) => s.id)).toEqual(expect.arrayContaining([moderate.id, restrictive.id, permissive.id]));
    expect(listed.find((s) => s.id === restrictive.id)).toMatchObject({ status: 'running', runtime: 'runsc' });
    const other = new DockerBackend({ instanceId: uniqueName('other'), dataDir: join(dataDir, 'other'), logger: silentLogger() });
    expect(await other.list()).toEqual([]);
  });

  it('lists what others did to its containers in the engine at once: a kill, a start, a removal (the listing is kept only while the engine records no event)', async () => {
    const state = await backend.create(specOf());
    const statusOf = async () => (await backend.list()).find((s) => s.id === state.id)?.status;
    expect(await statusOf()).toBe('running');
    expect(await statusOf()).toBe('running');
    await docker('kill', state.id);
    expect(await statusOf()).toBe('stopped');
    await docker('start', state.id);
    expect(await statusOf()).toBe('running');
    await docker('rm', '-f', state.id);
    expect(await statusOf()).toBeUndefined();
  });

  it('refuses a second container with the same name and uuid', async () => {
    const spec = specOf();
    await backend.create(spec);
    expect(await codeOf(backend.create(spec))).toBe('CONFLICT');
  });

  it('fails with IMAGE_UNAVAILABLE and the hint for a missing image, leaving no container', async () => {
    const spec = specOf({ image: 'sandboxd-test/missing:latest' });
    const err = await backend.create(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('IMAGE_UNAVAILABLE');
    expect((err as ServiceError).message).toMatch(
      /^image 'sandboxd-test\/missing:latest' is not available locally and could not be pulled \(.+\); build it with/,
    );
    expect((await backend.list()).some((s) => s.name === spec.name)).toBe(false);
  });

  it('reports an unreachable engine as BACKEND_UNAVAILABLE', async () => {
    const offline = new DockerBackend({ instanceId, dataDir, logger: silentLogger(), socketPath: '/nonexistent/docker.sock' });
    const err = await offline.ping().catch((e: unknown) => e);
    expect((err as ServiceError).code).toBe('BACKEND_UNAVAILABLE');
    expect((err as ServiceError).message).toContain('Docker Engine is not reachable at /nonexistent/docker.sock');
  });
});

describe('isolation and limits', () => {
  it('passes the spec env and never the server environment', async () => {
    const env = (await run(moderate.id, ['env'])).stdout;
    expect(env).toContain('GREETING=hello from spec');
    expect(env).not.toContain('SANDBOXD_TEST_MARKER');
    expect(env).not.toContain('must-not-leak');
  });

  it('mounts nothing from the host but the agent (read-only) and its own socket directory', async () => {
    for (const state of [moderate, restrictive, permissive]) {
      const info = await inspectJson(state.id);
      const mounts = (info.Mounts as Array<{ Source: string; Destination: string; RW: boolean }>)
        .map(({ Source, Destination, RW }) => ({ Source, Destination, RW }))
        .sort((a, b) => a.Destination.localeCompare(b.Destination));
      expect(mounts).toEqual([
        { Source: expect.stringMatching(/^\/run\/sandboxd\/bin\/agent-[0-9a-f]{16}$/), Destination: '/.sandboxd/agent', RW: false },
        { Source: join(defaultRuntimeDir(dataDir), instanceId, state.uuid), Destination: '/run/sandboxd', RW: true },
      ]);
      // The copy is the agent that setup built.
      expect(readFileSync(mounts[0]!.Source).equals(readFileSync(agentBinary()))).toBe(true);
    }
  });

  it('applies the memory and cpu limits', async () => {
    const cgroup = (file: string) => run(moderate.id, ['cat', `/sys/fs/cgroup/${file}`]).then((r) => r.stdout.trim());
    // memory + swap equal to memory: no swap at all.
    expect(await cgroup('memory/memory.limit_in_bytes')).toBe(String(256 * 1024 * 1024));
    expect(await cgroup('memory/memory.memsw.limit_in_bytes')).toBe(String(256 * 1024 * 1024));
    expect(await cgroup('cpu/cpu.cfs_quota_us')).toBe('100000');
    expect(await cgroup('pids/pids.max')).toBe(String(PIDS_LIMIT));
    const hog = await run(moderate.id, ['python3', '-c', 'b = bytearray(400 * 1024 * 1024); print("survived")']);
    expect(hog.exit_code).toBe(137);
    expect(hog.stdout).not.toContain('survived');
  });

  it('contains a fork bomb and stays usable: the agent (PID 1) survives a full pids limit', async () => {
    const state = await backend.create(specOf({ vcpus: 0.5 }));
    const before = (await inspectJson(state.id)).State;
    // One bomb in the command's process group, one that left it (setsid): the timeout must kill
    // both while they hold every pid, so the kill may not fork.
    const bombs = 'setsid bash -c "bomb() { bomb | bomb & }; bomb" & bomb() { bomb | bomb & }; bomb; sleep 100';
    const bomb = run(state.id, ['bash', '-c', bombs], { timeout_ms: 4_000 });
    // Requests while the pids are full make the agent's Go runtime want more OS threads; without
    // its reserve of threads it died of "newosproc" here, and the sandbox with it.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const during = await Promise.all(Array.from({ length: 20 }, () => codeOf(run(state.id, ['true'], { timeout_ms: 2_000 }))));
    expect(during.every((outcome) => outcome === 'resolved')).toBe(true);
    expect((await bomb).timed_out).toBe(true);
    // Killed processes are reaped by the agent a moment later; its own threads count as pids.
    const commandPids = async () => {
      const [pids, threads] = (await sh(state.id, 'cat /sys/fs/cgroup/pids/pids.current; grep Threads /proc/1/status | cut -f2')).stdout.split('\n');
      return Number(pids) - Number(threads);
    };
    await expect.poll(commandPids, { timeout: 5_000 }).toBeLessThan(10);
    expect((await run(state.id, ['echo', 'still here'])).stdout).toBe('still here\n');
    const after = (await inspectJson(state.id)).State;
    expect(after).toMatchObject({ Running: true, StartedAt: before.StartedAt, Pid: before.Pid });
    expect((await run(moderate.id, ['echo', 'still here'])).stdout).toBe('still here\n');
    await backend.remove(state.id);
  });

  it('restrictive: no network, read-only root, writable /tmp and /workspace, gVisor, no capabilities', async () => {
    const info = await inspectJson(restrictive.id);
    expect(info.HostConfig).toMatchObject({
      Runtime: 'runsc',
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
    });
    expect(restrictive.ip).toBeUndefined();
    const interfaces = (await run(restrictive.id, ['cat', '/proc/net/dev'])).stdout;
    expect(interfaces.split('\n').slice(2).filter(Boolean).map((l) => l.split(':')[0]!.trim())).toEqual(['lo']);
    expect((await run(restrictive.id, ['touch', '/x'])).exit_code).not.toBe(0);
    expect((await run(restrictive.id, ['touch', '/x'], { user: 'root' })).output).toContain('Read-only file system');
    expect((await sh(restrictive.id, 'touch /tmp/a /workspace/b && echo ok')).stdout).toBe('ok\n');
    expect(await ownerOf(restrictive.id, '/workspace')).toBe('1000');
    expect((await run(restrictive.id, ['dmesg'])).stdout).toContain('gVisor');
    // Under gVisor the bounding set also holds gVisor's own CAP_SYS_ADMIN, with which the agent
    // hides its /proc entries at start (agent/proc_mask.go) before dropping it; no command holds
    // it (permitted and effective below are empty), and no-new-privileges keeps exec from adding it.
    expect(await capBnd(restrictive.id)).toBe(AGENT_CAPS | CAP_SYS_ADMIN);
    expect(await capSets(restrictive.id)).toEqual({ prm: 0n, eff: 0n });
    expect(await capSets(restrictive.id, 'root')).toEqual({ prm: 0n, eff: 0n });
    expect(await noNewPrivs(restrictive.id)).toBe('1');
  });

  it('restrictive falls back to runc with the same confinement', async () => {
    const runcOnly = new DockerBackend({ instanceId, dataDir, logger: silentLogger(), restrictiveRuntime: 'runc' });
    const state = await runcOnly.create(specOf({ profile: 'restrictive' }));
    expect(state.runtime).toBe('runc');
    expect((await run(state.id, ['touch', '/x'], { user: 'root' })).output).toContain('Read-only file system');
    await backend.writeFile(state.id, '/workspace/w.txt', Buffer.from('w'));
    expect(await ownerOf(state.id, '/workspace')).toBe('1000');
    expect(await capBnd(state.id)).toBe(AGENT_CAPS);
    expect(await capSets(state.id, 'root')).toEqual({ prm: 0n, eff: 0n });
    expect((await run(state.id, ['cat', '/proc/net/dev'])).stdout).not.toContain('eth0');
    await backend.remove(state.id);
  });

  it('restrictive with a root image: commands and files are nobody\'s, /workspace too', async () => {
    const state = await backend.create(specOf({ image: ROOT_IMAGE, profile: 'restrictive' }));
    await backend.writeFile(state.id, '/workspace/r.txt', Buffer.from('r'));
    expect(await ownerOf(state.id, '/workspace')).toBe('65534');
    expect(await ownerOf(state.id, '/workspace/r.txt')).toBe('65534');
    await backend.remove(state.id);
  });

  it('moderate: bridge network, without NET_RAW, MKNOD, AUDIT_WRITE, no-new-privileges', async () => {
    expect(moderate.ip).toBeDefined();
    const caps = await capBnd(moderate.id);
    expect(caps & (CAP_NET_RAW | CAP_MKNOD | CAP_AUDIT_WRITE)).toBe(0n);
    expect(caps).not.toBe(0n);
    expect(await noNewPrivs(moderate.id)).toBe('1');
    expect((await sh(moderate.id, 'touch /tmp/x && echo ok')).stdout).toBe('ok\n');
  });

  it('permissive: bridge address, Docker default capabilities, runc', async () => {
    expect(permissive).toMatchObject({ runtime: 'runc', status: 'running' });
    expect(permissive.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const dropped = CAP_NET_RAW | CAP_MKNOD | CAP_AUDIT_WRITE;
    expect((await capBnd(permissive.id)) & dropped).toBe(dropped);
    expect(await noNewPrivs(permissive.id)).toBe('0');
    const fib = (await run(permissive.id, ['cat', '/proc/net/fib_trie'])).stdout;
    expect(fib).toContain(permissive.ip!);
  });
});

describe('exec', () => {
  it('returns exit codes as results', async () => {
    expect((await sh(moderate.id, 'exit 3')).exit_code).toBe(3);
    for (const id of [moderate.id, restrictive.id]) {
      const missing = await run(id, ['no-such-command']);
      expect(missing.exit_code).toBe(127);
      expect(missing.output).toContain('no-such-command');
      expect((await run(id, ['/no/such/path'])).exit_code).toBe(127);
    }
    expect((await run(moderate.id, ['/etc/passwd'])).exit_code).toBe(126);
  });

  it('keeps stdout and stderr apart and in arrival order', async () => {
    const result = await sh(moderate.id, 'echo 1; sleep 0.1; echo 2 >&2; sleep 0.1; echo 3');
    expect(result).toMatchObject({ output: '1\n2\n3\n', stdout: '1\n3\n', stderr: '2\n', exit_code: 0 });
    expect(result.duration_ms).toBeGreaterThanOrEqual(200);
  });

  it('feeds stdin and closes it', async () => {
    expect((await run(moderate.id, ['cat'], { stdin: Buffer.from('hello\n') })).stdout).toBe('hello\n');
    const big = randomBytes(3 * 1024 * 1024);
    expect((await run(moderate.id, ['wc', '-c'], { stdin: big })).stdout.trim()).toBe(String(big.length));
  });

  it('honours env, workdir and user', async () => {
    expect((await sh(moderate.id, 'echo "$FOO"', { env: { FOO: 'bar baz' } })).stdout).toBe('bar baz\n');
    expect((await run(moderate.id, ['pwd'], { workdir: '/tmp' })).stdout).toBe('/tmp\n');
    expect((await run(moderate.id, ['pwd'])).stdout).toBe('/workspace\n');
    expect((await run(moderate.id, ['id', '-un'])).stdout).toBe('sandbox\n');
    expect((await run(moderate.id, ['id', '-u'], { user: 'root' })).stdout).toBe('0\n');
  });

  for (const profile of ['moderate', 'restrictive'] as const) {
    it(`times out with partial output and kills the whole tree (${profile})`, async () => {
      const id = profile === 'moderate' ? moderate.id : restrictive.id;
      const started = Date.now();
      // setsid leaves the process group: only the run's tag finds it (as the command's own user).
      const result = await sh(id, 'echo started; setsid sleep 103 & sleep 101 & sleep 102', { timeout_ms: 1_500 });
      expect(result).toMatchObject({ timed_out: true, exit_code: 124, output: 'started\n' });
      expect(Date.now() - started).toBeLessThan(8_000);
      const left = await processes(id);
      expect(left).not.toContain('sleep 101');
      expect(left).not.toContain('sleep 102');
      expect(left).not.toContain('sleep 103');
    });
  }

  it('kills only the command that timed out, not its neighbours', async () => {
    const [survivor, victim] = await Promise.all([
      sh(moderate.id, 'sleep 2; echo survivor'),
      sh(moderate.id, 'sleep 105', { timeout_ms: 500 }),
    ]);
    expect(victim.timed_out).toBe(true);
    expect(survivor).toMatchObject({ exit_code: 0, stdout: 'survivor\n', timed_out: false });
  });

  it('kills a root command on timeout under gVisor', async () => {
    const result = await sh(restrictive.id, 'sleep 103', { timeout_ms: 1_000, user: 'root' });
    expect(result.timed_out).toBe(true);
    expect(await processes(restrictive.id)).not.toContain('sleep 103');
  });

  it('stops on abort with what was printed so far', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 700);
    const started = Date.now();
    const result = await backend.exec(
      moderate.id,
      { command: ['sh', '-c', 'echo before; sleep 104; echo after'], timeout_ms: 60_000 },
      { signal: controller.signal },
    );
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(result).toMatchObject({ output: 'before\n', timed_out: false });
    expect(result.exit_code).not.toBe(0);
    expect(await processes(moderate.id)).not.toContain('sleep 104');
  });

  it('streams output as it arrives', async () => {
    const chunks: Array<OutputChunk & { at: number }> = [];
    const started = Date.now();
    const result = await backend.exec(
      moderate.id,
      { command: ['sh', '-c', 'echo first; sleep 2; echo second >&2'], timeout_ms: 60_000 },
      { onOutput: (chunk) => chunks.push({ ...chunk, at: Date.now() - started }) },
    );
    expect(chunks.map((c) => [c.stream, c.data.toString()])).toEqual([
      ['stdout', 'first\n'],
      ['stderr', 'second\n'],
    ]);
    expect(chunks[0]!.at).toBeLessThan(result.duration_ms - 1_000);
  });

  it('caps a runaway writer', async () => {
    const capped = await sh(moderate.id, 'yes | head -c 20000000', { max_output_bytes: 1024 * 1024 });
    expect(capped).toMatchObject({ exit_code: 0, truncated: true, timed_out: false });
    expect(capped.output.length).toBe(1024 * 1024);
    const endless = await run(moderate.id, ['yes'], { max_output_bytes: 64 * 1024, timeout_ms: 2_000 });
    expect(endless).toMatchObject({ truncated: true, timed_out: true, exit_code: 124 });
    expect(endless.output.length).toBe(64 * 1024);
  });
});

describe('files', () => {
  it('round-trips text and binary, creating parents, owned by the default user', async () => {
    const text = Buffer.from('héllo wörld ✓\n');
    await backend.writeFile(moderate.id, '/workspace/a/b/c.txt', text);
    expect(await backend.readFile(moderate.id, '/workspace/a/b/c.txt')).toEqual(text);
    expect(await ownerOf(moderate.id, '/workspace/a/b/c.txt')).toBe('1000');
    expect(await ownerOf(moderate.id, '/workspace/a')).toBe('1000');

    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await backend.writeFile(moderate.id, '/tmp/bytes.bin', every);
    expect(await backend.readFile(moderate.id, '/tmp/bytes.bin')).toEqual(every);
  });

  it('round-trips 16 MiB byte for byte', async () => {
    const big = randomBytes(16 * 1024 * 1024);
    await backend.writeFile(moderate.id, '/workspace/big.bin', big);
    expect((await backend.readFile(moderate.id, '/workspace/big.bin')).equals(big)).toBe(true);
  });

  it('refuses to read a file beyond 64 MiB', async () => {
    await run(moderate.id, ['sh', '-c', 'head -c 70000000 /dev/zero > /tmp/huge']);
    expect(await codeOf(backend.readFile(moderate.id, '/tmp/huge'))).toBe('PAYLOAD_TOO_LARGE');
    expect(await processes(moderate.id)).not.toContain('cat -- /tmp/huge');
    await backend.deleteFile(moderate.id, '/tmp/huge');
  });

  it('never lets a path reach the shell as code', async () => {
    const path = `/workspace/we ird $(touch /tmp/pwned) 'q' "d" \`id\`.txt`;
    await backend.writeFile(moderate.id, path, Buffer.from('odd'));
    expect((await backend.readFile(moderate.id, path)).toString()).toBe('odd');
    expect((await run(moderate.id, ['test', '-e', '/tmp/pwned'])).exit_code).toBe(1);
    await backend.deleteFile(moderate.id, path);
  });

  it('maps missing, directory and permission failures', async () => {
    expect(await codeOf(backend.readFile(moderate.id, '/workspace/nope.txt'))).toBe('NOT_FOUND');
    await expect(backend.readFile(moderate.id, '/workspace/nope.txt')).rejects.toThrow("file '/workspace/nope.txt' not found");
    await expect(backend.readFile(moderate.id, '/workspace')).rejects.toThrow("'/workspace' is a directory");
    expect(await codeOf(backend.readFile(moderate.id, '/workspace'))).toBe('BAD_REQUEST');
    await expect(backend.readFile(moderate.id, '/etc/shadow')).rejects.toThrow('permission denied: /etc/shadow');
    expect(await codeOf(backend.writeFile(moderate.id, '/etc/sandboxd.txt', Buffer.from('x')))).toBe('FORBIDDEN');
    expect(await codeOf(backend.writeFile(moderate.id, '/workspace', Buffer.from('x')))).toBe('BAD_REQUEST');
    expect(await codeOf(backend.deleteFile(moderate.id, '/workspace/nope.txt'))).toBe('NOT_FOUND');
    expect(await codeOf(backend.deleteFile(moderate.id, '/etc/passwd'))).toBe('FORBIDDEN');
  });

  it('deletes files and whole directories', async () => {
    await backend.writeFile(moderate.id, '/workspace/tree/x/y.txt', Buffer.from('y'));
    await backend.deleteFile(moderate.id, '/workspace/tree/x/y.txt');
    expect(await codeOf(backend.readFile(moderate.id, '/workspace/tree/x/y.txt'))).toBe('NOT_FOUND');
    await backend.writeFile(moderate.id, '/workspace/tree/x/z.txt', Buffer.from('z'));
    await backend.deleteFile(moderate.id, '/workspace/tree');
    expect((await run(moderate.id, ['test', '-e', '/workspace/tree'])).exit_code).toBe(1);
  });

  it('works on the tmpfs mounts of a gVisor sandbox', async () => {
    const content = randomBytes(2 * 1024 * 1024);
    await backend.writeFile(restrictive.id, '/workspace/deep/dir/blob.bin', content);
    expect((await backend.readFile(restrictive.id, '/workspace/deep/dir/blob.bin')).equals(content)).toBe(true);
    expect(await ownerOf(restrictive.id, '/workspace/deep/dir/blob.bin')).toBe('1000');
    await backend.writeFile(restrictive.id, '/tmp/t.txt', Buffer.from('t'));
    expect(await codeOf(backend.writeFile(restrictive.id, '/etc/x', Buffer.from('x')))).toBe('FORBIDDEN');
    await backend.deleteFile(restrictive.id, '/workspace/deep');
    expect(await codeOf(backend.readFile(restrictive.id, '/workspace/deep/dir/blob.bin'))).toBe('NOT_FOUND');
  });
});

describe('git source', () => {
  let fixture: GitFixture;
  let repoUrl: string;

  beforeAll(async () => {
    fixture = await startGitFixture();
    repoUrl = `${fixture.baseUrl}/repo.git`;
  });
  afterAll(() => fixture?.stop());

  it('clones a branch into /workspace of a moderate sandbox, owned by the default user', async () => {
    const state = await backend.create(specOf({ source: { url: repoUrl, ref: 'feature' } }));
    expect((await backend.readFile(state.id, '/workspace/feature.txt')).toString()).toBe('on feature\n');
    expect(await ownerOf(state.id, '/workspace/README.md')).toBe('1000');
    expect(await ownerOf(state.id, '/workspace')).toBe('1000');
    expect((await run(state.id, ['git', 'status', '--short', '--branch'])).stdout).toContain('## feature');
    await backend.remove(state.id);
  });

  it('clones into the tmpfs /workspace of a restrictive sandbox', async () => {
    const state = await backend.create(specOf({ profile: 'restrictive', source: { url: repoUrl } }));
    expect((await backend.readFile(state.id, '/workspace/README.md')).toString()).toBe('hello main\n');
    expect(await ownerOf(state.id, '/workspace/README.md')).toBe('1000');
    expect((await run(state.id, ['git', 'log', '--oneline'])).stdout).toContain('readme');
    await backend.remove(state.id);
  });

  it('checks out a commit id', async () => {
    const state = await backend.create(specOf({ source: { url: repoUrl, ref: fixture.firstCommit } }));
    expect((await run(state.id, ['git', 'rev-parse', 'HEAD'])).stdout.trim()).toBe(fixture.firstCommit);
    expect(await codeOf(backend.readFile(state.id, '/workspace/README.md'))).toBe('NOT_FOUND');
    await backend.remove(state.id);
  });

  it('rejects local and option-like sources', async () => {
    const local = [`file://${fixture.dir}/repo.git`, `${fixture.dir}/repo.git`, '--upload-pack=touch /tmp/x', 'ext::sh -c x'];
    for (const url of local) {
      expect(await codeOf(backend.create(specOf({ source: { url } })))).toBe('BAD_REQUEST');
    }
    const optionRef = specOf({ source: { url: repoUrl, ref: '--orphan' } });
    expect(await codeOf(backend.create(optionRef))).toBe('BAD_REQUEST');
  });

  it('fails a clone cleanly, leaving no container and no clone', async () => {
    const clones = async () => (await readdir(tmpdir())).filter((name) => name.startsWith('sandboxd-source-'));
    const before = await clones();
    const spec = specOf({ source: { url: `${fixture.baseUrl}/missing.git` } });
    const err = await backend.create(spec).catch((e: unknown) => e);
    expect((err as ServiceError).code).toBe('SOURCE_UNAVAILABLE');
    expect((err as ServiceError).message).toBe('source_url: could not be cloned (the server log says why)');
    expect((await backend.list()).some((s) => s.name === spec.name)).toBe(false);
    expect(await clones()).toEqual(before);
  });
});

interface GitFixture {
  dir: string;
  /** git://127.0.0.1:<port>, serving dir/repo.git */
  baseUrl: string;
  /** The first commit of main, an empty one (no README.md yet). */
  firstCommit: string;
  stop(): Promise<void>;
}

/** A bare repository (main with README.md, branch feature with feature.txt) served by `git daemon`. */
async function startGitFixture(): Promise<GitFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-git-'));
  const work = join(dir, 'work');
  await git(dir, 'init', '-q', '-b', 'main', work);
  await git(work, 'commit', '-q', '--allow-empty', '-m', 'first');
  const firstCommit = await git(work, 'rev-parse', 'HEAD');
  await writeFile(join(work, 'README.md'), 'hello main\n');
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'readme');
  await git(work, 'checkout', '-q', '-b', 'feature');
  await writeFile(join(work, 'feature.txt'), 'on feature\n');
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'feature');
  await git(work, 'checkout', '-q', 'main');
  await git(dir, 'clone', '-q', '--bare', work, join(dir, 'repo.git'));
  const port = await freePort();
  const daemon = spawn(
    'git',
    ['daemon', '--reuseaddr', '--export-all', `--base-path=${dir}`, '--listen=127.0.0.1', `--port=${port}`, dir],
    { stdio: 'ignore' },
  );
  await waitForPort(port);
  return {
    dir,
    baseUrl: `git://127.0.0.1:${port}`,
    firstCommit,
    stop: async () => {
      daemon.kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function git(cwd: string, ...args: string[]): Promise<string> {
  const identity = { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
  const child = spawn('git', args, { cwd, env: { ...process.env, ...identity } });
  let out = '';
  child.stdout.on('data', (data: Buffer) => (out += data.toString()));
  const code = await new Promise((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`git ${args.join(' ')} failed`);
  return out.trim();
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      }).on('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`git daemon did not listen on ${port}`);
}
