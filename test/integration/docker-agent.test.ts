import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecRequest, InstanceState } from '../../src/backends/backend.js';
import { agentBinary, defaultRuntimeDir } from '../../src/backends/docker/agent-sockets.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { TEST_IMAGE, docker, ensureTestImage, sandboxSpec, removeInstanceContainers, uniqueName } from '../helpers/docker.js';

const instanceId = uniqueName('itest-agent');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-'));
const backend = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });
/** Where this instance's agent socket directories are (the default runtime directory). */
const agentDirs = join(defaultRuntimeDir(dataDir), instanceId);

const specOf = sandboxSpec;

const run = (id: string, command: string[], extra: Partial<ExecRequest> = {}) => backend.exec(id, { command, timeout_ms: 60_000, ...extra });

/** The parent pid of a command: 1 when the agent (PID 1) started it, 0 for an Engine API exec. */
const parentOf = async (id: string) => (await run(id, ['sh', '-c', 'cut -d" " -f4 /proc/$$/stat'])).stdout.trim();

/** Capability masks of a command; `sudo` runs it as root. */
async function caps(id: string, sudo = false): Promise<{ prm: string; eff: string }> {
  const status = (await run(id, ['cat', '/proc/self/status'], sudo ? { user: 'root' } : {})).stdout;
  return { prm: /CapPrm:\s*(\w+)/.exec(status)![1]!, eff: /CapEff:\s*(\w+)/.exec(status)![1]! };
}

/** Prints user:group of each path argument. */
const OWNERS = 'import grp, os, pwd, sys\nfor p in sys.argv[1:]:\n    s = os.stat(p)\n    print(f"{pwd.getpwuid(s.st_uid).pw_name}:{grp.getgrgid(s.st_gid).gr_name}")';

let moderate: InstanceState;
let restrictive: InstanceState;

beforeAll(async () => {
  await ensureTestImage();
  [moderate, restrictive] = await Promise.all([backend.create(specOf()), backend.create(specOf({ profile: 'restrictive' }))]);
});

afterAll(async () => {
  await removeInstanceContainers(instanceId);
  await backend.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the sandbox agent', () => {
  it('runs as PID 1 and serves exec in runc and gVisor sandboxes', async () => {
    for (const state of [moderate, restrictive]) {
      expect((await run(state.id, ['cat', '/proc/1/cmdline'])).stdout.split('\0')[0]).toBe('/.sandboxd/agent');
      expect(await parentOf(state.id)).toBe('1');
      expect((await run(state.id, ['id', '-un'])).stdout).toBe('sandbox\n');
      expect((await run(state.id, ['id', '-un'], { user: 'root' })).stdout).toBe('root\n');
    }
    expect(restrictive.runtime).toBe('runsc');
  });

  it('serves exec and files itself: the engine records no exec for them', async () => {
    /** The engine's exec_create events for the container since `since` (unix seconds). */
    const engineExecs = async (since: number) =>
      (await docker('events', '--since', String(since), '--until', String(Math.ceil(Date.now() / 1000) + 1), '--filter', `container=${moderate.id}`, '--filter', 'event=exec_create', '--format', '{{.Action}}'))
        .split('\n')
        .filter(Boolean);
    const since = Math.floor(Date.now() / 1000) - 1;
    for (let i = 0; i < 5; i++) await run(moderate.id, ['true']);
    await backend.writeFile(moderate.id, '/tmp/through-agent', Buffer.from('x'));
    expect((await backend.readFile(moderate.id, '/tmp/through-agent')).toString()).toBe('x');
    expect(await engineExecs(since)).toEqual([]);
    // What the check would see of an Engine API exec:
    await docker('exec', moderate.id, 'true');
    expect(await engineExecs(since)).toHaveLength(1);
  });

  it('does file operations as the sandbox user in runc and gVisor sandboxes', async () => {
    // runc: on a thread of the agent with the user's credentials; gVisor: in a child process.
    for (const state of [moderate, restrictive]) {
      await backend.writeFile(state.id, '/workspace/agent-files/owned.txt', Buffer.from('mine'));
      // Python's stat, as gVisor's statx refuses coreutils' flags.
      const owners = await run(state.id, ['python3', '-c', OWNERS, '/workspace/agent-files', '/workspace/agent-files/owned.txt']);
      expect(owners.stdout + owners.stderr, state.runtime).toBe('sandbox:sandbox\nsandbox:sandbox\n');
      expect((await backend.readFile(state.id, '/workspace/agent-files/owned.txt')).toString()).toBe('mine');
      await expect(backend.readFile(state.id, '/etc/shadow'), state.runtime).rejects.toMatchObject({ code: 'FORBIDDEN' });
      await expect(backend.writeFile(state.id, '/etc/agent-files', Buffer.from('x')), state.runtime).rejects.toMatchObject({ code: 'FORBIDDEN' });
      await expect(backend.deleteFile(state.id, '/etc/hostname'), state.runtime).rejects.toMatchObject({ code: 'FORBIDDEN' });
      // Nothing of the user's credentials stays with the agent: root commands still read what only root may.
      expect((await run(state.id, ['head', '-c', '5', '/etc/shadow'], { user: 'root' })).exit_code, state.runtime).toBe(0);
      await backend.deleteFile(state.id, '/workspace/agent-files');
      expect((await run(state.id, ['test', '-e', '/workspace/agent-files'])).exit_code).toBe(1);
    }
  });


  it('serves again after a stop and a start', async () => {
    const state = await backend.create(specOf());
    await backend.stop(state.id);
    await backend.start(state.id);
    expect(await parentOf(state.id)).toBe('1');
    await backend.remove(state.id);
    expect(existsSync(join(agentDirs, state.uuid))).toBe(false);
    expect(existsSync(join(agentDirs, `${state.uuid}.sock`))).toBe(false);
  });

  it('falls back to the Engine API exec for a container without an agent, as its default user', async () => {
    const uuid = randomUUID();
    const id = await docker(
      'run', '-d', '--label', 'sandboxd.managed=true', '--label', `sandboxd.instance=${instanceId}`,
      '--label', `sandboxd.uuid=${uuid}`, '--label', 'sandboxd.name=old', TEST_IMAGE, 'sleep', 'infinity',
    );
    expect(await parentOf(id)).toBe('0');
    expect((await run(id, ['id', '-un'])).stdout).toBe('sandbox\n');
    await backend.writeFile(id, '/workspace/old.txt', Buffer.from('old'));
    expect((await backend.readFile(id, '/workspace/old.txt')).toString()).toBe('old');
    await backend.remove(id);
  });

  it('never connects to what the sandbox puts in place of its socket', async () => {
    const state = await backend.create(specOf());
    const hostDir = mkdtempSync(join(tmpdir(), 'sandboxd-host-'));
    const hostSocket = join(hostDir, 'host.sock');
    let connections = 0;
    const server = createServer((conn) => {
      connections++;
      conn.destroy();
    });
    await new Promise<void>((resolve) => server.listen(hostSocket, resolve));
    try {
      // As on a host where the socket directory could not be sealed (a server without
      // CAP_LINUX_IMMUTABLE): the sandbox can write there.
      await promisify(execFile)(agentBinary(), ['set-immutable', 'off', join(agentDirs, state.uuid)]);
      await run(state.id, ['sh', '-c', `rm /run/sandboxd/agent.sock && ln -s ${hostSocket} /run/sandboxd/agent.sock`], { user: 'root' });
      // A restarted server links the socket afresh: it must refuse the symlink and use the engine.
      const restarted = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });
      expect((await restarted.exec(state.id, { command: ['echo', 'safe'], timeout_ms: 10_000 })).stdout).toBe('safe\n');
      await run(state.id, ['sh', '-c', 'rm /run/sandboxd/agent.sock && mkdir /run/sandboxd/agent.sock'], { user: 'root' });
      expect((await restarted.exec(state.id, { command: ['echo', 'safe'], timeout_ms: 10_000 })).stdout).toBe('safe\n');
      await restarted.close();
      expect(connections).toBe(0);
    } finally {
      server.close();
      rmSync(hostDir, { recursive: true, force: true });
      await backend.remove(state.id);
    }
  });

  it('keeps its socket from the sandbox user', async () => {
    const script = 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/sandboxd/agent.sock")';
    for (const state of [moderate, restrictive]) {
      const attempt = await run(state.id, ['python3', '-c', script]);
      expect(attempt.exit_code).not.toBe(0);
      expect(attempt.stderr).toMatch(/PermissionError|Permission denied/);
    }
  });

  it('gives commands no more capabilities than the profile: none in restrictive, even with sudo', async () => {
    expect(await caps(restrictive.id)).toEqual({ prm: '0000000000000000', eff: '0000000000000000' });
    expect(await caps(restrictive.id, true)).toEqual({ prm: '0000000000000000', eff: '0000000000000000' });
    expect(await caps(moderate.id)).toEqual({ prm: '0000000000000000', eff: '0000000000000000' });
    // Docker's default set without NET_RAW, MKNOD and AUDIT_WRITE.
    expect(await caps(moderate.id, true)).toEqual({ prm: '00000000800405fb', eff: '00000000800405fb' });
  });

  it('removes the socket directories of sandboxes that no longer exist when it lists', async () => {
    const orphan = randomUUID();
    // Where this version keeps them, and where earlier ones did (the data directory).
    for (const root of [agentDirs, join(dataDir, 'agents')]) {
      mkdirSync(join(root, orphan), { recursive: true });
      writeFileSync(join(root, `${orphan}.sock`), '');
    }
    await promisify(execFile)(agentBinary(), ['set-immutable', 'on', join(agentDirs, orphan)]);
    await backend.list();
    for (const root of [agentDirs, join(dataDir, 'agents')]) {
      expect(existsSync(join(root, orphan))).toBe(false);
      expect(existsSync(join(root, `${orphan}.sock`))).toBe(false);
    }
    expect(existsSync(join(agentDirs, moderate.uuid))).toBe(true);
  });
});
