import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BACKENDS, BackendConfigError, createBackend, type BackendContext } from '../../../src/backends/registry.js';
import { loadConfig } from '../../../src/config/load-config.js';
import { BACKEND_IDS } from '../../../src/domain/backend-ids.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let dataDir: string | undefined;
let h: FakeHarness | undefined;
afterEach(async () => {
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  await h?.close();
  h = undefined;
});

const context = (): BackendContext => {
  dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-registry-'));
  return { deploymentId: 'registry-test', networkName: 'sdregistry', dataDir, logger: silentLogger(), imageHint: () => 'build it' };
};

describe('backend registry', () => {
  it('has one entry per backend id, and each config schema takes what it reads from the default configuration', () => {
    expect(Object.keys(BACKENDS).sort()).toEqual([...BACKEND_IDS].sort());
    const config = loadConfig({ env: {}, flags: { dataDir: '/tmp/unused' } });
    for (const [id, entry] of Object.entries(BACKENDS)) expect(entry.configSchema.safeParse(config).success, id).toBe(true);
    expect(BACKENDS.docker.configSchema.parse({ ...config, pidsLimit: 300 })).toEqual({ pidsLimit: 300, sourceAllowedHosts: [] });
  });

  it('makes each backend from its options, and names the option that does not fit', async () => {
    const docker = createBackend('docker', context(), { pidsLimit: 64 });
    expect(docker.name).toBe('docker');
    await docker.close();
    expect(createBackend('fake', context(), {}).name).toBe('fake');
    expect(() => createBackend('docker', context(), { pidsLimit: 2 })).toThrow(BackendConfigError);
    expect(() => createBackend('docker', context(), { pidsLimit: 2 })).toThrow(/docker backend:\n  pidsLimit: /);
  });
});

describe('capabilities through the API', () => {
  it('GET /status lists the backend\'s capabilities, and routes of a missing one answer 422 naming the backend', async () => {
    h = await fakeHarness();
    const status = async () => (await h!.app.inject({ url: '/status' })).json().data;
    expect(await status()).toMatchObject({ backend: 'fake', capabilities: ['snapshots', 'archive', 'resize', 'pool_claim', 'gateway', 'egress', 'file_views', 'file_archives', 'volumes'] });
    await h.services.sandboxes.create({ name: 'a' });

    const detach = await h.app.inject({ method: 'POST', url: '/sandboxes/a/exec/detach', payload: { command: ['sleep', '9'] } });
    expect(detach.statusCode).toBe(422);
    expect(detach.json()).toEqual({ success: false, error: "the 'fake' backend does not support detached commands", code: 'UNSUPPORTED' });
    const browser = await h.app.inject({ method: 'POST', url: '/sandboxes/a/browser/start' });
    expect(browser.statusCode).toBe(422);
    expect(browser.json()).toMatchObject({ error: "the 'fake' backend does not support browser automation", code: 'UNSUPPORTED' });

    h.backend.declare('detached');
    expect((await status()).capabilities).toEqual(['snapshots', 'archive', 'resize', 'pool_claim', 'detached', 'gateway', 'egress', 'file_views', 'file_archives', 'volumes']);
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/a/exec/detach', payload: { command: ['sleep', '9'] } })).json()).toMatchObject({ success: true, data: { status: 'completed' } });
    h.backend.omit('resize', 'snapshots');
    expect((await h.app.inject({ method: 'POST', url: '/sandboxes/a/resize', payload: { vcpus: 1 } })).json()).toMatchObject({ code: 'UNSUPPORTED', error: "the 'fake' backend does not support resize" });
    expect((await h.app.inject({ method: 'POST', url: '/snapshots', payload: { sandbox: 'a', name: 's' } })).json()).toMatchObject({ code: 'UNSUPPORTED', error: "the 'fake' backend does not support snapshots" });
  });
});
