import Sqlite from 'better-sqlite3';
import Dockerode from 'dockerode';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

const docker = new Dockerode();

let rt: DockerRuntime | undefined;
afterAll(async () => {
  const id = rt?.deploymentId;
  await rt?.dispose();
  // The adopted tags of other tests' built images (the images themselves keep their own tags).
  if (id) for (const image of await docker.listImages({ filters: { reference: [`sandboxd-user/${id}/*`] } })) for (const tag of image.RepoTags ?? []) await docker.getImage(tag).remove().catch(() => undefined);
});

/**
 * Turns a closed data directory back into one from before deployment ids: its id as
 * `instance_id`, migrations from 0022 on not yet applied (its engine objects are as that server made them).
 */
function asBeforeDeploymentIds(dataDir: string, id: string): void {
  const db = new Sqlite(join(dataDir, 'sandboxd.db'));
  db.prepare("DELETE FROM meta WHERE key IN ('deployment_id', 'network_name', 'adopt_built_images')").run();
  db.prepare("INSERT INTO meta (key, value) VALUES ('instance_id', ?)").run(id);
  // Migrations from 0022 on were not applied yet (0023 added a column, 0024 a table, 0025 a column and its index, 0026 a table).
  db.prepare("DELETE FROM kysely_migration WHERE name >= '0022'").run();
  db.prepare('ALTER TABLE sandboxes DROP COLUMN internal').run();
  db.prepare('DROP TABLE proxy_decisions').run();
  db.prepare('DROP INDEX objects_uid_number').run();
  db.prepare('ALTER TABLE objects DROP COLUMN uid_number').run();
  db.prepare('DROP TABLE replicas').run();
  db.close();
}

describe('a data directory from before deployment ids', () => {
  it('keeps its sandboxes and snapshots after the upgrade: its instance id becomes its deployment id', async () => {
    rt = await dockerRuntime({ poolSize: 0 });
    const box = uniqueName('upgrade');
    const snap = uniqueName('upgrade-snap');
    const api = (method: string, path: string, body?: unknown) => call(rt!.url, method, path, body);
    expect((await api('POST', '/sandboxes', { name: box, image: BASE_IMAGE })).status).toBe(201);
    await api('POST', `/sandboxes/${box}/exec`, { command: ['sh', '-c', 'echo kept > /workspace/kept'] });
    expect((await api('POST', '/snapshots', { name: snap, sandbox: box })).status).toBe(201);
    const id = rt.deploymentId;
    const { dataDir } = rt;
    await rt.close();

    asBeforeDeploymentIds(dataDir, id);
    rt = await dockerRuntime({ poolSize: 0, dataDir });
    expect(rt.deploymentId).toBe(id);
    // Recovery found its container as its own (an orphan would have been removed, the sandbox lost).
    const kept = await api('POST', `/sandboxes/${box}/exec`, { command: ['cat', '/workspace/kept'] });
    expect(kept.body.data?.stdout, JSON.stringify(kept.body)).toBe('kept\n');
    expect((await api('GET', `/sandboxes/${box}`)).body.data.status).toBe('running');
    const restored = await api('POST', `/snapshots/${snap}/restore`, { as_name: `${box}-r` });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect((await api('POST', `/sandboxes/${box}-r/exec`, { command: ['cat', '/workspace/kept'] })).body.data.stdout).toBe('kept\n');
  });
});
