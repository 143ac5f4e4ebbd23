import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, uniqueName } from '../helpers/docker-runtime.js';
import { upload } from '../helpers/preview-upload.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'preview-shutdown-key';
const auth = { authorization: `Bearer ${KEY}` };
const UNREAD = readFileSync(join(import.meta.dirname, '../integration/fixtures/unread-upload.py'), 'utf8');
/** What the issue asks of a stop: graceful, and within 10 s, always. */
const STOP_WITHIN_MS = 10_000;

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-e2e-preview-'));
let server: ServerProcess | undefined;
afterAll(async () => {
  // A stop that hung is ended here; the sandbox goes with a server started again on the same data.
  server?.child.kill('SIGKILL');
  const again = await startServer(dir, ['--api-key', KEY]);
  for (const { name } of ((await call(again.url, 'GET', '/sandboxes', undefined, auth)).body.data ?? []) as { name: string }[]) {
    await call(again.url, 'DELETE', `/sandboxes/${name}`, undefined, auth);
  }
  await again.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('sandboxd serve with preview connections under way', () => {
  it('exits within 10 s of SIGTERM while uploads to a preview are stuck', async () => {
    server = await startServer(dir, ['--api-key', KEY]);
    const { url } = server;
    const api = (method: string, path: string, body?: unknown) => call(url, method, path, body, auth);
    const name = uniqueName('preview-stop');
    expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
    expect((await api('POST', `/sandboxes/${name}/files`, { files: { '/tmp/unread-upload.py': UNREAD } })).status).toBe(200);
    expect((await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['python3', '/tmp/unread-upload.py', '8000', '/tmp/unread.log'] })).status).toBe(200);
    await expect.poll(async () => (await fetch(`${url}/sandboxes/${name}/ports/8000/ready`, { headers: auth })).status, { timeout: 30_000 }).toBe(200);

    // One upload the app answered without reading, one it never answers: both stuck.
    const large = 256 * 1024 * 1024;
    const answered = upload(url, `/sandboxes/${name}/ports/8000/early`, auth, large, 64 * 1024);
    const waiting = upload(url, `/sandboxes/${name}/ports/8000/never`, auth, large, 64 * 1024);
    await answered.answered;
    await expect.poll(async () => (await api('POST', `/sandboxes/${name}/exec`, { command: ['cat', '/tmp/unread.log'] })).body.data?.stdout, { timeout: 30_000 }).toContain('/never');

    const started = Date.now();
    const exited = new Promise<void>((resolve) => server?.child.once('exit', () => resolve()));
    server.child.kill('SIGTERM');
    // Waited for a while longer than the bound, so that a stop that hangs fails here rather than at the test's time-out.
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, STOP_WITHIN_MS + 5_000))]);
    const took = Date.now() - started;
    expect(server.child.exitCode ?? server.child.signalCode, `still running ${took} ms after SIGTERM`).not.toBeNull();
    expect(took).toBeLessThan(STOP_WITHIN_MS);
    expect(server.child.exitCode).toBe(0);
    await Promise.all([answered.closed, waiting.closed]);
    server = undefined;
  });
});
