import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startReceiver } from '../helpers/receiver.js';
import { runCli, startServer } from '../helpers/server-process.js';

/** One temporary folder for the file; a data directory per server inside it. */
const root = mkdtempSync(join(tmpdir(), 'sandboxd-e2e-obs-'));
let servers = 0;
const dataDir = () => mkdirSync(join(root, `server-${++servers}`), { recursive: true })!;
afterAll(() => rmSync(root, { recursive: true, force: true }));

// The fake backend: these tests are about the flags and the process, not about isolation.
describe('sandboxd serve with observability flags', () => {
  it('delivers to every --webhook-url, and flushes spans to --otel-endpoint on SIGTERM', async () => {
    const hooks = await startReceiver();
    const otlp = await startReceiver();
    const server = await startServer(dataDir(), [
      '--backend',
      'fake',
      '--webhook-url',
      `${hooks.url}/a`,
      '--webhook-url',
      `${hooks.url}/b`,
      '--webhook-secret',
      'a-secret-of-sixteen-chars',
      '--otel-endpoint',
      otlp.url,
    ]);
    try {
      expect((await call(server.url, 'POST', '/sandboxes', { name: 'e2e-obs' })).status).toBe(201);
      const got = await hooks.waitFor(2);
      expect(got.map((r) => r.path).sort()).toEqual(['/a', '/b']);
      expect(got.every((r) => JSON.parse(r.body).type === 'sandbox.created')).toBe(true);
      expect(got.every((r) => String(r.headers['x-sandboxd-signature']).startsWith('sha256='))).toBe(true);
      expect(otlp.received).toHaveLength(0); // batched: nothing sent yet
    } finally {
      await server.stop();
      await hooks.close();
    }
    const spans = otlp.received
      .filter((r) => r.path === '/v1/traces')
      .flatMap((r) => JSON.parse(r.body).resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans)));
    await otlp.close();
    expect(spans.map((s: { name: string }) => s.name)).toContain('POST /sandboxes');
  });

  it('refuses a bad webhook URL, a short secret and a bad OTLP endpoint, naming the flag', async () => {
    const dir = dataDir();
    const url = await runCli(['serve', '--data-dir', dir, '--backend', 'fake', '--webhook-url', 'ftp://example.org/hook']);
    expect(url.code).toBe(2);
    expect(url.stderr).toContain('--webhook-url: must be an http(s) URL');
    const secret = await runCli(['serve', '--data-dir', dir, '--backend', 'fake', '--webhook-secret', 'short']);
    expect(secret.stderr).toContain('--webhook-secret: a webhook secret must be at least 16 characters');
    const otel = await runCli(['serve', '--data-dir', dir, '--backend', 'fake'], { SERVICE_OTEL_ENDPOINT: 'collector:4318' });
    expect(otel.stderr).toContain('SERVICE_OTEL_ENDPOINT: must be an http(s) URL');
  });
});
