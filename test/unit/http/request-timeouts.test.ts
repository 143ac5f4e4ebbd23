import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/http/app.js';
import type { App } from '../../../src/http/route-types.js';
import { silentLogger } from '../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

/** The request time-out of these tests: replies below last several times longer. */
const TIMEOUT_MS = 500;

let h: FakeHarness;
let app: App;
afterEach(async () => {
  await app?.close();
  await h?.close();
});

/** The service on a real socket with a short request time-out. */
async function listening(): Promise<{ port: number; url: string }> {
  h = await fakeHarness({ poolSize: 1 });
  app = await buildApp({ services: h.services, apiKeys: [], logger: silentLogger(), requestTimeoutMs: TIMEOUT_MS });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { port, url: `http://127.0.0.1:${port}` };
}

/** Sends `raw` and never more; resolves with all the server wrote once it closes the connection. */
function sendAndWait(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let received = '';
    socket.setEncoding('utf8').on('data', (text: string) => (received += text));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
  });
}

describe('request time-outs', () => {
  it('cuts a body that never completes, and headers that never end, with a 408', async () => {
    const { port } = await listening();
    const body = await sendAndWait(
      port,
      'POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
    );
    expect(body).toMatch(/^HTTP\/1\.1 408 /);
    const headers = await sendAndWait(port, 'GET /health HTTP/1.1\r\nHost: x\r\n');
    expect(headers).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('lets an exec and an SSE stream last longer than the request time-out', async () => {
    const { url } = await listening();
    // Each command runs until its timeout_ms, several times the request time-out.
    h.backend.onExec = () => ({ chunks: [{ stream: 'stdout', text: 'working\n' }], hang: true });
    const post = (path: string, body: object) =>
      fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post('/sandboxes', { name: 'box' })).status).toBe(201);
    const exec = await post('/sandboxes/box/exec', { command: ['sleep', '9'], timeout_ms: TIMEOUT_MS * 4 });
    expect(exec.status).toBe(200);
    expect(((await exec.json()) as { data: unknown }).data).toMatchObject({ timed_out: true, stdout: 'working\n' });
    const stream = await post('/run/stream', { command: ['sleep', '9'], timeout_ms: TIMEOUT_MS * 4 });
    expect(stream.status).toBe(200);
    const events = await stream.text();
    expect(events).toContain('working');
    expect(events).toContain('event: done');
  });
});
