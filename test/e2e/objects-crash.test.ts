import Docker from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * kill -9 of the server in the middle of a stream of calls to one durable object: after a
 * restart the object's storage holds every call that was answered (and at most the one whose
 * answer the kill cut off), the object is hibernating or active with a sandbox that runs, and
 * calls go on from there.
 */
const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-objcrash-'));
const args = ['--gc-interval', '0', '--reconcile-interval', '0', '--pool-size', '0'];
let server: ServerProcess | undefined;
let instance = '';

afterAll(async () => {
  try {
    if (server) {
      for (const o of (await call(server.url, 'GET', '/objects')).body.data as { id: string }[]) await call(server.url, 'DELETE', `/objects/${o.id}`);
    }
  } finally {
    await server?.stop();
  }
  if (instance) {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`sandboxd.instance=${instance}`] } })) await docker.getContainer(c.Id).remove({ force: true });
  }
  rmSync(dir, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown) => call(server!.url, method, path, body);

describe('durable objects across kill -9 of the server', () => {
  it('keep every answered call, and go on after the restart', async () => {
    server = await startServer(dir, args);
    const source = "export function increment(args, ctx) { const n = ctx.storage.get('count', 0) + 1; ctx.storage.put('count', n); return n; }";
    expect((await api('POST', '/objects/classes', { name: 'crashy', runtime: 'node', source })).status).toBe(201);
    expect((await api('POST', '/objects/crashy/k/call/increment')).body.data).toBe(1);
    const object = (await api('GET', '/objects/crashy/k')).body.data;
    const [container] = await docker.listContainers({ all: true, filters: { label: [`sandboxd.name=${object.sandbox}`] } });
    instance = container?.Labels['sandboxd.instance'] ?? '';
    expect(instance).not.toBe('');

    let answered = 1;
    let stop = false;
    const caller = (async () => {
      while (!stop) {
        const res = await api('POST', '/objects/crashy/k/call/increment').catch(() => undefined);
        if (!res) return;
        if (res.status === 200) answered = res.body.data;
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 1500 + Math.random() * 1000));
    await server.kill9();
    stop = true;
    await caller;

    server = await startServer(dir, args);
    const after = (await api('GET', '/objects/crashy/k')).body.data;
    expect(after.storage.count === answered || after.storage.count === answered + 1, `count ${after.storage.count}, answered ${answered}`).toBe(true);
    expect(answered).toBeGreaterThan(1);
    const next = await api('POST', '/objects/crashy/k/call/increment');
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.data).toBe(after.storage.count + 1);
    expect((await api('GET', `/sandboxes/${object.sandbox}`)).body.data.status).toBe('running');
  });
});
