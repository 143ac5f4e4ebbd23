import Docker from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-crash-'));
let server: ServerProcess | undefined;

let instance = '';

// Cleans up without relying on the server, which a failed test may have left dead.
afterAll(async () => {
  await server?.kill9();
  if (instance) {
    const rows = await docker.listContainers({ all: true, filters: { label: [`sandboxd.instance=${instance}`] } });
    await Promise.all(rows.map((row) => docker.getContainer(row.Id).remove({ force: true })));
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Containers of this data directory's instance (other test runs may share the engine), by uuid. */
async function containers(): Promise<Map<string, { id: string; state: string; pooled: boolean }>> {
  const rows = await docker.listContainers({ all: true, filters: { label: ['sandboxd.managed=true', `sandboxd.instance=${instance}`] } });
  return new Map(
    // Pool instances by their role: claim containers (sandboxd-pool-*) and run containers (sandboxd-runner-*).
    rows.map((r) => [r.Labels['sandboxd.uuid']!, { id: r.Id, state: r.State, pooled: r.Labels['sandboxd.role'] === 'pool' }]),
  );
}

/** Ids of every container of ours, just before a kill. */
const containerIds = async () => new Set([...(await containers()).values()].map((c) => c.id));

/**
 * Every sandbox is consistent with the engine, and no container of ours is unaccounted for:
 * the only containers no sandbox owns are pool instances the new server made (those of the
 * killed server were reaped).
 */
async function expectConsistent(url: string, beforeKill: Set<string> = new Set()) {
  const list = (await call(url, 'GET', '/sandboxes')).body.data as { name: string; uuid: string; status: string }[];
  const engine = await containers();
  const ours = new Set(list.map((s) => s.uuid));
  for (const sb of list) {
    const state = engine.get(sb.uuid)?.state;
    expect(state === 'running' ? 'running' : 'stopped', sb.name).toBe(sb.status);
    if (sb.status === 'running') {
      expect((await call(url, 'POST', `/sandboxes/${sb.name}/exec`, { command: ['true'] })).body.data.exit_code).toBe(0);
    }
  }
  for (const [uuid, container] of engine) {
    if (ours.has(uuid)) continue;
    expect(container.pooled && !beforeKill.has(container.id), `container ${uuid} is an orphan`).toBe(true);
  }
  return list;
}

describe('recovery after kill -9', () => {
  it('keeps every sandbox consistent and leaks no container, whenever the server dies', async () => {
    server = await startServer(dir);
    const first = await call(server.url, 'POST', '/sandboxes', { name: 'survivor' });
    expect(first.status).toBe(201);
    const [row] = await docker.listContainers({ all: true, filters: { label: [`sandboxd.uuid=${first.body.data.uuid}`] } });
    instance = row!.Labels['sandboxd.instance']!;
    expect((await call(server.url, 'POST', '/sandboxes', { name: 'was-stopped' })).status).toBe(201);
    await call(server.url, 'POST', '/sandboxes/was-stopped/stop');

    // Kill during creates, at several moments of the create.
    for (const [i, delay] of [20, 150, 400, 900].entries()) {
      void call(server.url, 'POST', '/sandboxes', { name: `mid-create-${i}` }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, delay));
      const beforeKill = await containerIds();
      await server.kill9();
      server = await startServer(dir);
      const list = await expectConsistent(server.url, beforeKill);
      expect(list.map((s) => s.name)).toEqual(expect.arrayContaining(['survivor', 'was-stopped']));
      const again = await call(server.url, 'POST', '/sandboxes', { name: `mid-create-${i}` });
      expect([201, 409]).toContain(again.status);
    }

    // Kill during an exec.
    void call(server.url, 'POST', '/sandboxes/survivor/exec', { command: ['sh', '-c', 'echo started > /tmp/mark; sleep 30'] }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 800));
    let beforeKill = await containerIds();
    await server.kill9();
    server = await startServer(dir);
    await expectConsistent(server.url, beforeKill);
    const survivor = (await call(server.url, 'GET', '/sandboxes/survivor')).body.data;
    expect(survivor.status).toBe('running');
    expect((await call(server.url, 'GET', '/sandboxes/survivor/files/tmp/mark')).body.data.content).toBe('started\n');
    expect((await call(server.url, 'GET', '/sandboxes/was-stopped')).body.data.status).toBe('stopped');

    // Kill during a delete: after restart the sandbox is either fully there or fully gone.
    void call(server.url, 'DELETE', '/sandboxes/was-stopped').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 30));
    beforeKill = await containerIds();
    await server.kill9();
    server = await startServer(dir);
    await expectConsistent(server.url, beforeKill);

    // Kill just after a DELETE answered, while the engine may still be removing the container
    // in the background: the restart removes it (an orphan once its record is gone).
    expect((await call(server.url, 'POST', '/sandboxes', { name: 'departing' })).status).toBe(201);
    expect((await call(server.url, 'DELETE', '/sandboxes/departing')).status).toBe(200);
    beforeKill = await containerIds();
    await server.kill9();
    server = await startServer(dir);
    await expectConsistent(server.url, beforeKill);
    expect((await call(server.url, 'GET', '/sandboxes/departing')).status).toBe(404);

    // A container removed behind the server's back: the sandbox stays, lost with the reason, and
    // start makes a new one and says so.
    const uuid = survivor.uuid as string;
    const [current] = await docker.listContainers({ all: true, filters: { label: [`sandboxd.uuid=${uuid}`] } });
    await server.stop();
    await docker.getContainer(current!.Id).remove({ force: true });
    server = await startServer(dir);
    const lost = (await call(server.url, 'GET', '/sandboxes/survivor')).body.data;
    expect(lost.status).toBe('lost');
    expect(lost.status_reason).toEqual(expect.any(String));
    expect((await call(server.url, 'POST', '/sandboxes/survivor/start')).body.data).toMatchObject({ status: 'running', recreated: true });
    await expectConsistent(server.url);
  });
});
