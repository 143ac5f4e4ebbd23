import Docker from 'dockerode';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

const docker = new Docker();
let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

beforeAll(async () => {
  process.env.SANDBOXD_TEST_SERVER_SECRET = 'must-not-leak';
  rt = await dockerRuntime();
  api = (method, path, body) => call(rt.url, method, path, body);
});
afterAll(async () => {
  await rt?.dispose();
  delete process.env.SANDBOXD_TEST_SERVER_SECRET;
});

const containerOf = async (uuid: string) =>
  (await docker.listContainers({ all: true, filters: { label: [`sandboxd.uuid=${uuid}`] } }))[0];

/**
 * What a command in the sandbox sees as its host's name: `hostname`, $HOSTNAME, /etc/hostname,
 * how many /etc/hosts lines name it, and how many name a pool instance.
 */
const hostNames = async (name: string) => {
  const script = 'hostname; echo "$HOSTNAME"; cat /etc/hostname; grep -c -w "$(hostname)" /etc/hosts; grep -c pool- /etc/hosts';
  const result = (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', script] })).body.data;
  return result.output as string;
};

describe('hostname', () => {
  // A sandbox on a network has a line for its name in /etc/hosts; the restrictive one has no network.
  for (const [profile, lines] of [['moderate', 1], ['restrictive', 0]] as const) {
    it(`is a pooled ${profile} sandbox's name in hostname, $HOSTNAME, /etc/hostname and /etc/hosts, also after stop and start`, async () => {
      const names = [uniqueName('hn'), uniqueName('hn')];
      for (const name of names) {
        expect((await api('POST', '/sandboxes', { name, profile })).status).toBe(201);
        await rt.services.pool.settled();
      }
      const pooled = names[1]!;
      const uuid = (await api('GET', `/sandboxes/${pooled}`)).body.data.uuid as string;
      expect((await containerOf(uuid))?.Labels['sandboxd.name']).toMatch(/^pool-/);
      expect(await hostNames(pooled)).toBe(`${pooled}\n${pooled}\n${pooled}\n${lines}\n0\n`);
      expect((await api('POST', `/sandboxes/${pooled}/stop`)).status).toBe(200);
      expect((await api('POST', `/sandboxes/${pooled}/start`)).status).toBe(200);
      expect(await hostNames(pooled)).toBe(`${pooled}\n${pooled}\n${pooled}\n${lines}\n0\n`);
      for (const name of names) await api('DELETE', `/sandboxes/${name}`);
    });
  }

  it("is the sandbox's name, made directly or from a warm-pool instance (runc), not the container id", async () => {
    // The first create of a key is made directly and fills the pool; the next ones claim from it.
    const names = [uniqueName('host'), uniqueName('host'), uniqueName('host')];
    for (const name of names) {
      expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
      await rt.services.pool.settled();
    }
    for (const name of names) {
      const result = (await api('POST', `/sandboxes/${name}/exec`, { command: ['hostname'] })).body.data;
      expect(result.output, name).toBe(`${name}\n`);
      await api('DELETE', `/sandboxes/${name}`);
    }
  });

  it('is the name of a restrictive (gVisor) sandbox, made directly or claimed from the pool, whose agent then holds no CAP_SYS_ADMIN', async () => {
    // The first is made directly and fills the pool of its key; the second claims from it.
    const names = [uniqueName('host-gv'), uniqueName('host-gv')];
    for (const name of names) {
      expect((await api('POST', '/sandboxes', { name, profile: 'restrictive' })).status).toBe(201);
      await rt.services.pool.settled();
    }
    // The second was a pool instance (its container keeps the pool name as a label).
    const second = (await api('GET', `/sandboxes/${names[1]}`)).body.data.uuid as string;
    expect((await containerOf(second))?.Labels['sandboxd.name']).toMatch(/^pool-/);
    for (const name of names) {
      expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['hostname'] })).body.data.output, name).toBe(`${name}\n`);
      // CAP_SYS_ADMIN (bit 21), which a gVisor pool instance's agent holds until its claim, is gone.
      const status = (await api('POST', `/sandboxes/${name}/exec`, { command: ['grep', 'CapEff', '/proc/1/status'] })).body.data.output as string;
      expect(BigInt(`0x${status.split(/\s+/)[1]}`) & (1n << 21n), name).toBe(0n);
      await api('DELETE', `/sandboxes/${name}`);
    }
  });
});

describe('sandbox lifecycle through the API', () => {
  it('creates, lists, inspects, updates, stops, starts and removes a real container', async () => {
    const name = uniqueName('life');
    const created = await api('POST', '/sandboxes', {
      name,
      labels: { team: 'core', tier: 'test' },
      description: 'lifecycle test',
      lifecycle: { auto_stop_after_seconds: 600 },
    });
    expect(created.status).toBe(201);
    expect(created.body.success).toBe(true);
    const sb = created.body.data;
    expect(sb).toMatchObject({ name, status: 'running', backend: 'docker', vcpus: 1, memory_mb: 512, profile: 'moderate' });
    expect(sb.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect((await containerOf(sb.uuid))?.State).toBe('running');

    const got = await api('GET', `/sandboxes/${name}`);
    expect(got.body.data).toMatchObject({
      name,
      uuid: sb.uuid,
      labels: { team: 'core', tier: 'test' },
      description: 'lifecycle test',
      lifecycle: { auto_stop_after_seconds: 600 },
      image: 'sandboxd/base:bookworm',
    });
    expect(got.body.data.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await api('GET', `/sandboxes/by-uuid/${sb.uuid}`)).body.data.name).toBe(name);

    const listed = await api('GET', '/sandboxes?label=team:core&label=tier:test');
    expect(listed.body.data).toEqual([
      {
        name,
        uuid: sb.uuid,
        status: 'running',
        backend: 'docker',
        ip: sb.ip,
        image: 'sandboxd/base:bookworm',
        profile: 'moderate',
        labels: { team: 'core', tier: 'test' },
        description: 'lifecycle test',
        created_at: sb.created_at,
      },
    ]);
    expect((await api('GET', '/sandboxes?label=team:core&label=tier:prod')).body.data).toEqual([]);

    const patched = await api('PATCH', `/sandboxes/${name}`, { labels: { team: 'other' }, lifecycle: null });
    expect(patched.status).toBe(200);
    const afterPatch = (await api('GET', `/sandboxes/${name}`)).body.data;
    expect(afterPatch.labels).toEqual({ team: 'other' });
    expect(afterPatch.lifecycle).toBeUndefined();

    await api('PUT', `/sandboxes/${name}/files/workspace/keep.txt`, { content: 'survives stop' });
    const stopped = await api('POST', `/sandboxes/${name}/stop`);
    expect(stopped.body.data.status).toBe('stopped');
    expect(stopped.body.data.ip).toBeUndefined();
    expect((await containerOf(sb.uuid))?.State).toBe('exited');
    const refused = await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain(`POST /sandboxes/${name}/start`);

    expect((await api('POST', `/sandboxes/${name}/start`)).body.data.status).toBe('running');
    expect((await api('GET', `/sandboxes/${name}/files/workspace/keep.txt`)).body.data.content).toBe('survives stop');

    const removed = await api('DELETE', `/sandboxes/${name}`);
    expect(removed).toEqual({ status: 200, body: { success: true, data: `sandbox '${name}' removed` } });
    // The engine removes the container in the background, once the record is gone.
    await rt.services.departures.settled();
    expect(await containerOf(sb.uuid)).toBeUndefined();
    expect((await api('GET', `/sandboxes/${name}`)).status).toBe(404);
  });

  it('answers 404, 409 and 400 where it should', async () => {
    const name = uniqueName('codes');
    expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
    const dup = await api('POST', '/sandboxes', { name });
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject({ success: false, code: 'CONFLICT', error: `sandbox '${name}' already exists` });
    for (const [method, path] of [
      ['GET', '/sandboxes/ghost-box'],
      ['PATCH', '/sandboxes/ghost-box'],
      ['POST', '/sandboxes/ghost-box/start'],
      ['POST', '/sandboxes/ghost-box/stop'],
      ['DELETE', '/sandboxes/ghost-box'],
      ['GET', '/sandboxes/ghost-box/logs'],
      ['GET', '/sandboxes/ghost-box/files/etc/hostname'],
      ['GET', `/sandboxes/by-uuid/01900000-0000-7000-8000-000000000000`],
    ]) {
      const res = await api(method!, path!, method === 'PATCH' ? {} : undefined);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.success).toBe(false);
    }
    expect((await api('POST', '/sandboxes/ghost-box/exec', { command: ['true'] })).status).toBe(404);
    for (const bad of ['UPPER', '-dash', 'a'.repeat(64), 'sp ace', 'slash%2Fx']) {
      expect((await api('GET', `/sandboxes/${bad}`)).status, bad).toBe(400);
    }
    expect((await api('GET', '/sandboxes/by-uuid/not-a-uuid')).status).toBe(400);
    const missingImage = await api('POST', '/sandboxes', { name: uniqueName('noimg'), image: 'sandboxd-test/absent:nope' });
    expect(missingImage.status).toBe(422);
    expect(missingImage.body.error).toMatch(/sandboxd-test\/absent:nope/);
    const baseMissing = await api('POST', '/sandboxes', { name: uniqueName('noimg'), image: 'sandboxd/python:never' });
    expect(baseMissing.status).toBe(422);
    await api('DELETE', `/sandboxes/${name}`);
  });

  it('writes an audit log sorted by timestamp', async () => {
    const name = uniqueName('audit');
    await api('POST', '/sandboxes', { name });
    await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] });
    await api('PUT', `/sandboxes/${name}/files/tmp/a`, { content: 'a' });
    await api('GET', `/sandboxes/${name}/files/tmp/a`);
    await api('DELETE', `/sandboxes/${name}/files/tmp/a`);
    await api('POST', `/sandboxes/${name}/stop`);
    await api('POST', `/sandboxes/${name}/start`);
    const logs = (await api('GET', `/sandboxes/${name}/logs`)).body.data as { timestamp: string; event: string; sandbox: string }[];
    expect(logs.map((e) => e.event)).toEqual([
      'sandbox_created',
      'command_executed',
      'file_written',
      'file_read',
      'file_deleted',
      'sandbox_stopped',
      'sandbox_started',
    ]);
    expect(logs.every((e) => e.sandbox === name)).toBe(true);
    expect([...logs].sort((a, b) => a.timestamp.localeCompare(b.timestamp))).toEqual(logs);
    expect(logs[1]).toMatchObject({ command: ['true'], exit_code: 0 });
    await api('DELETE', `/sandboxes/${name}`);
  });
});

describe('isolation and limits', () => {
  it('gives the restrictive profile no network, a read-only root, tmpfs workspace and gVisor', async () => {
    const name = uniqueName('strict');
    const created = await api('POST', '/sandboxes', { name, profile: 'restrictive' });
    expect(created.status).toBe(201);
    expect(created.body.data.ip).toBeUndefined();
    const detail = (await api('GET', `/sandboxes/${name}`)).body.data;
    expect(detail.runtime).toBe('runsc');
    const run = async (script: string) => (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', script] })).body.data;
    const interfaces = await run(`python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))'`);
    expect(interfaces.output.trim()).toBe('lo');
    expect((await run('touch /home/sandbox/owned-but-read-only 2>&1; echo rc=$?')).output).toMatch(/Read-only file system[\s\S]*rc=1/);
    expect((await run('echo ok > /workspace/w && echo ok > /tmp/t && cat /workspace/w /tmp/t')).output).toBe('ok\nok\n');
    expect((await run('dmesg 2>/dev/null | head -1')).output).toContain('gVisor');
    expect((await run('grep CapEff /proc/self/status')).output).toMatch(/CapEff:\s+0+\s/);
    await api('DELETE', `/sandboxes/${name}`);
  });

  it('enforces memory_mb and vcpus as cgroup limits, and a pids limit', async () => {
    const name = uniqueName('limits');
    await api('POST', '/sandboxes', { name, memory_mb: 128, vcpus: 1 });
    const run = async (command: string[]) => (await api('POST', `/sandboxes/${name}/exec`, { command, timeout_ms: 60_000 })).body.data;
    expect((await run(['cat', '/sys/fs/cgroup/memory/memory.limit_in_bytes'])).output.trim()).toBe(String(128 * 1024 * 1024));
    expect((await run(['cat', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us'])).output.trim()).toBe('100000');
    expect((await run(['cat', '/sys/fs/cgroup/pids/pids.max'])).output.trim()).toBe('512');
    const hog = await run(['python3', '-c', 'b = bytearray(400 * 1024 * 1024); print("allocated")']);
    expect(hog.exit_code).toBe(137);
    expect(hog.output).not.toContain('allocated');
    const fits = await run(['python3', '-c', 'b = bytearray(32 * 1024 * 1024); print("allocated")']);
    expect(fits.output).toBe('allocated\n');
    await api('DELETE', `/sandboxes/${name}`);
  });

  it('keeps the server environment, host paths and the Docker socket out of sandboxes', async () => {
    const name = uniqueName('leak');
    const created = await api('POST', '/sandboxes', { name, env: { GIVEN: 'yes' }, profile: 'permissive' });
    const out = (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'env; ls /var/run/docker.sock 2>&1; cat /proc/mounts'] })).body.data.output;
    expect(out).toContain('GIVEN=yes');
    expect(out).not.toContain('must-not-leak');
    expect(out).not.toContain('SANDBOXD_TEST_SERVER_SECRET');
    expect(out).toContain('No such file or directory');
    const info = await docker.getContainer((await containerOf(created.body.data.uuid))!.Id).inspect();
    // Only the agent: its binary read-only, and this sandbox's own socket directory.
    const mounts = (info.Mounts ?? []).map(({ Source, Destination, RW }) => ({ Source, Destination, RW }));
    // Both from the runtime directory (/run/sandboxd as root), which names nothing of the host.
    expect(mounts.sort((a, b) => a.Destination.localeCompare(b.Destination))).toEqual([
      { Source: expect.stringMatching(/^\/run\/sandboxd\/bin\/agent-[0-9a-f]{16}$/), Destination: '/.sandboxd/agent', RW: false },
      { Source: expect.stringMatching(new RegExp(`^/run/sandboxd/[^/]+/${created.body.data.uuid}$`)), Destination: '/run/sandboxd', RW: true },
    ]);
    expect(info.HostConfig.Privileged).toBe(false);
    await api('DELETE', `/sandboxes/${name}`);
  });

  it('drops NET_RAW in the moderate profile and keeps it in the permissive one', async () => {
    const capEff = async (profile: string) => {
      const name = uniqueName(profile);
      await api('POST', '/sandboxes', { name, profile });
      const out = (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'grep CapBnd /proc/self/status'], sudo: false })).body.data.output;
      await api('DELETE', `/sandboxes/${name}`);
      return BigInt(`0x${/CapBnd:\s+([0-9a-f]+)/.exec(out)![1]}`);
    };
    const NET_RAW = 1n << 13n;
    expect((await capEff('moderate')) & NET_RAW).toBe(0n);
    expect((await capEff('permissive')) & NET_RAW).toBe(NET_RAW);
  });
});

describe('the Docker Engine going away', () => {
  it('answers 503 while the engine is unreachable', async () => {
    const previous = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = 'unix:///nonexistent/docker.sock';
    const down = await dockerRuntime();
    try {
      const res = await call(down.url, 'POST', '/sandboxes', { name: uniqueName('down') });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatch(/Docker Engine is not reachable/);
      expect((await call(down.url, 'GET', '/health')).status).toBe(200);
    } finally {
      if (previous === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = previous;
      await down.close();
    }
  });
});
