import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createDockerClient } from '../../../../src/backends/docker/docker-client.js';

const servers: Server[] = [];
let dir: string | undefined;
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const listen = (server: Server, at: string | number): Promise<void> =>
  new Promise((resolve) => {
    servers.push(server);
    server.listen(at, () => resolve());
  });

describe('the Engine API client', () => {
  it('never follows a redirect: the request fails and nothing reaches the Location', async () => {
    // The target a redirect would send the host to: it counts what reaches it.
    const reached: string[] = [];
    const target = createServer((req, res) => {
      reached.push(req.url ?? '');
      res.end('{}');
    });
    await listen(target, 0);
    const port = (target.address() as AddressInfo).port;
    // An engine on a unix socket that answers as dockerd answers `/images/../HOST:PORT/x/json`.
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-engine-'));
    const socketPath = join(dir, 'docker.sock');
    const engine = createServer((req, res) => {
      const location = req.url?.startsWith('/images/') ? `http://127.0.0.1:${port}/x/json` : `/127.0.0.1:${port}/x/json`;
      res.writeHead(301, { Location: location }).end();
    });
    await listen(engine, socketPath);

    const docker = createDockerClient(socketPath);
    // The redirect itself fails the call, before any request to the Location is made (a followed
    // one would fail on the 301 instead, and its connection error would escape as unhandled).
    await expect(docker.getImage('x').inspect()).rejects.toThrow(/redirect/i);
    await expect(docker.listContainers()).rejects.toThrow(/redirect/i);
    expect(reached).toEqual([]);
  });
});
