import Sqlite from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../src/state/migrations/index.js';
import { openStore } from '../../../src/state/store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-store-'));
  dirs.push(dir);
  return dir;
};
const meta = (dir: string) => {
  const db = new Sqlite(join(dir, 'sandboxd.db'));
  try {
    return Object.fromEntries((db.prepare('SELECT key, value FROM meta').all() as { key: string; value: string }[]).map((row) => [row.key, row.value]));
  } finally {
    db.close();
  }
};

describe('the deployment id', () => {
  it('is made at the first open of a data directory, with a network name of its own, and kept', async () => {
    const dirA = dataDir();
    const a = await openStore(dirA);
    const { deploymentId, networkName } = a;
    await a.close();
    expect(deploymentId).toMatch(/^[0-9a-f]{12}$/);
    expect(networkName).toBe(`sd${deploymentId.slice(0, 10)}`);
    const again = await openStore(dirA);
    expect([again.deploymentId, again.networkName]).toEqual([deploymentId, networkName]);
    await again.close();
    const b = await openStore(dataDir());
    expect(b.deploymentId).not.toBe(deploymentId);
    expect(b.networkName).not.toBe(networkName);
    await b.close();
    expect(meta(dirA)).toMatchObject({ deployment_id: deploymentId, network_name: networkName });
    expect(meta(dirA).adopt_built_images).toBeUndefined();
  });

  it('of a data directory made before deployment ids is its instance id, which labels its containers; it keeps the network name sandboxd', async () => {
    const dir = dataDir();
    // A data directory as the server before migration 0022 left it.
    const before = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < '0022'));
    await (await openStore(dir, before)).close();
    const db = new Sqlite(join(dir, 'sandboxd.db'));
    db.prepare('DELETE FROM meta').run();
    db.prepare("INSERT INTO meta (key, value) VALUES ('instance_id', '3f9a1c2b-7e4')").run();
    db.close();

    const store = await openStore(dir);
    expect([store.deploymentId, store.networkName]).toEqual(['3f9a1c2b-7e4', 'sandboxd']);
    await store.close();
    expect(meta(dir)).toEqual({ deployment_id: '3f9a1c2b-7e4', network_name: 'sandboxd', adopt_built_images: '1' });
  });
});
