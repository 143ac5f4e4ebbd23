import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDockerClient } from '../../src/backends/docker/docker-client.js';
import { BASE_IMAGE, call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/** A listener on the host that records every request reaching it. */
async function hostListener(): Promise<{ server: Server; port: number; reached: string[] }> {
  const reached: string[] = [];
  const server = createServer((req, res) => {
    reached.push(`${req.method} ${req.url}`);
    res.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, reached };
}

let rt: DockerRuntime;
let listener: Awaited<ReturnType<typeof hostListener>>;
beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
  listener = await hostListener();
});
afterAll(async () => {
  await rt?.dispose();
  await new Promise((resolve) => listener?.server.close(resolve));
});

describe('requests that crashed the server or sent the host elsewhere', () => {
  it('the engine answers a traversing image reference with a redirect, which the client does not follow', async () => {
    const docker = createDockerClient();
    await expect(docker.getImage(`../127.0.0.1:${listener.port}/path`).inspect()).rejects.toThrow(/redirect/i);
    expect(listener.reached).toEqual([]);
  });

  it('answers malformed images with a 400 naming image on every route, and serves on', async () => {
    const images = [`../127.0.0.1:${listener.port}/path`, '../../etc', 'http://evil/x', 'a b', 'x\0y', 'rtl\u202e', '"q"', ['an', 'array']];
    for (const image of images) {
      for (const [path, body] of [
        ['/sandboxes', { name: uniqueName('img'), image }],
        ['/run', { command: ['true'], image }],
        ['/run/stream', { command: ['true'], image }],
        ['/batch/run', { commands: [{ command: ['true'], image }] }],
      ] as const) {
        const res = await call(rt.url, 'POST', path, body);
        expect(res.status, `${path} ${JSON.stringify(image)}`).toBe(400);
        expect(res.body.error, `${path} ${JSON.stringify(image)}`).toMatch(/image: /);
      }
    }
    // An image that is well formed but does not exist is the same 422 as ever; no pool key is made for it.
    const missing = await call(rt.url, 'POST', '/run', { command: ['true'], image: 'sandboxd-test/no-such-image:nope' });
    expect(missing.status).toBe(422);
    await rt.services.pool.settled();
    expect(rt.services.pool.onDemandKeys).toBe(0);
    expect(listener.reached).toEqual([]);
    expect((await call(rt.url, 'GET', '/health')).status).toBe(200);
  });

  it('answers a NUL in a sandbox name, over-long paths and a write to /dev/full with a 4xx', async () => {
    const name = uniqueName('hard');
    expect((await call(rt.url, 'POST', '/sandboxes', { name, image: BASE_IMAGE })).status).toBe(201);
    const nul = await call(rt.url, 'POST', `/sandboxes/${name}%00/exec`, { command: ['true'] });
    expect(nul.status).toBe(400);
    expect(nul.body.error).toMatch(/^name: /);
    for (const path of ['dev/full', `workspace/${'n'.repeat(256)}`, `workspace/${Array.from({ length: 20 }, () => 'd'.repeat(250)).join('/')}`]) {
      const res = await call(rt.url, 'PUT', `/sandboxes/${name}/files/${path}`, { content: 'x' });
      expect(res.status, path.slice(0, 40)).toBe(400);
    }
    expect((await call(rt.url, 'PUT', `/sandboxes/${name}/files/workspace/ok.txt`, { content: 'x' })).status).toBe(200);
    const ttl = await call(rt.url, 'POST', '/sandboxes', { name: uniqueName('ttl'), ttl: '99999999d' });
    expect(ttl).toMatchObject({ status: 400, body: { error: 'ttl: must be at most 365d' } });
  });

  it('answers a source_url on an open loopback port and on a closed one alike, and sends nothing to either', async () => {
    const answers = [];
    for (const url of [`http://127.0.0.1:${listener.port}/repo.git`, 'http://127.0.0.1:1/repo.git', `http://localhost:${listener.port}/x.git`]) {
      answers.push(await call(rt.url, 'POST', '/sandboxes', { name: uniqueName('src'), source_url: url }));
    }
    for (const answer of answers) {
      expect(answer).toEqual({
        status: 422,
        body: { success: false, error: 'source_url: could not be cloned (the server log says why)', code: 'SOURCE_UNAVAILABLE' },
      });
    }
    expect(listener.reached).toEqual([]);
    expect((await rt.services.sandboxes.list()).filter((s) => s.name.startsWith('src-'))).toEqual([]);
  });
});
