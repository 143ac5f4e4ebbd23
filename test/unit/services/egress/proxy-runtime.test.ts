import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../../src/config/load-config.js';
import { startRuntime } from '../../../../src/runtime.js';
import { ProxyStartError } from '../../../../src/services/egress/index.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-proxy-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const configFor = (dataDir: string, proxy: Record<string, unknown>) => loadConfig({ env: {}, flags: { dataDir, backend: 'fake', poolSize: '0', ...proxy } });

describe('the proxy port in the runtime', () => {
  it("listens with --proxy on the backend's gateway address (the fake's: 127.0.0.1) and stops at close", async () => {
    const runtime = await startRuntime(configFor(tempDir(), { proxy: true, proxyPort: 0 }), silentLogger(), { listen: false });
    const url = runtime.services.egress.url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/llm/openai/v1/models`)).status).toBe(401);
    await runtime.close();
    expect(runtime.services.egress.url).toBeUndefined();
    await expect(fetch(`${url}/llm/openai/v1/models`)).rejects.toThrow();
  });

  it('keeps proxy hooks across a restart and applies them at once', async () => {
    const dataDir = tempDir();
    const first = await startRuntime(configFor(dataDir, { proxy: true, proxyPort: 0 }), silentLogger(), { listen: false });
    await first.services.egress.hooks.create({ name: 'kept', event: 'on_request', match: { host: 'blocked.test' }, target: { type: 'block', status: 403 } });
    await first.close();
    const again = await startRuntime(configFor(dataDir, { proxy: true, proxyPort: 0 }), silentLogger(), { listen: false });
    expect((await again.services.egress.hooks.list()).map((h) => h.name)).toEqual(['kept']);
    const facts = { timestamp: '', sandbox: 's', sandbox_uuid: 'u', labels: {}, method: 'GET', url: 'http://blocked.test/', host: 'blocked.test', port: 80, path: '/', headers: {} };
    expect(await again.services.egress.hooks.onRequest(facts)).toMatchObject({ decision: 'deny', hook: 'kept' });
    await again.close();
  });

  it('does not listen without --proxy', async () => {
    const runtime = await startRuntime(configFor(tempDir(), {}), silentLogger(), { listen: false });
    expect(runtime.services.egress.url).toBeUndefined();
    await runtime.close();
  });

  it('a proxy port in use stops the start with a message naming --proxy-port, and leaves the data directory free', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    const dataDir = tempDir();
    try {
      const failed = startRuntime(configFor(dataDir, { proxy: true, proxyPort: port }), silentLogger(), { listen: false });
      await expect(failed).rejects.toThrow(ProxyStartError);
      await expect(failed).rejects.toThrow(`proxy port ${port} on 127.0.0.1 is in use: choose another with --proxy-port`);
      const again = await startRuntime(configFor(dataDir, { proxy: true, proxyPort: 0 }), silentLogger(), { listen: false });
      await again.close();
    } finally {
      blocker.close();
    }
  });
});
