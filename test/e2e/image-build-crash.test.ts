import Docker from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * kill -9 of the server in the middle of an image build: the layers the steps before made stay
 * on the engine (labelled with the build's id); after the restart the build reads as failed and
 * nothing of it remains, neither its images nor its containers.
 */
const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-buildcrash-'));
const args = ['--gc-interval', '0', '--reconcile-interval', '0', '--pool-size', '0'];
const name = `crash-${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
let server: ServerProcess | undefined;
let buildId = '';

/** The engine's containers and images of the build, by its label. */
async function leftOf(id: string): Promise<{ containers: string[]; images: string[] }> {
  const filters = JSON.stringify({ label: [`sandboxd.build=${id}`] });
  return {
    containers: (await docker.listContainers({ all: true, filters })).map((c) => c.Id),
    images: (await docker.listImages({ all: true, filters })).map((i) => i.Id),
  };
}

afterAll(async () => {
  await server?.stop();
  // Whatever a failed test left, by the build's label only.
  if (buildId) {
    const left = await leftOf(buildId);
    for (const id of left.containers) await docker.getContainer(id).remove({ force: true }).catch(() => undefined);
    for (const id of left.images.reverse()) await docker.getImage(id).remove({ force: true }).catch(() => undefined);
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('an image build across kill -9 of the server', () => {
  it('is failed after the restart, and its layers and containers are removed', async () => {
    server = await startServer(dir, args);
    const steps = [1, 2, 3].map((n) => `RUN echo layer-${n} > /tmp/layer-${n}`).join('\n');
    const response = await fetch(`${server.url}/images`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ name, dockerfile: `FROM ${BASE_IMAGE}\n${steps}\nRUN echo last-step-started && sleep 600\n` }),
    });
    let log = '';
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    while (!log.includes('last-step-started')) log += (await reader.read()).value ?? '';
    const running = ((await call(server.url, 'GET', '/images/builds')).body.data as { id: string; name: string; status: string }[]).find((b) => b.name === name);
    expect(running?.status).toBe('running');
    buildId = running!.id;

    await server.kill9();
    await reader.cancel().catch(() => undefined);
    // The engine stops the step once the client is gone; the layers the steps made stay.
    await expect.poll(async () => (await leftOf(buildId)).containers.length, { timeout: 60_000 }).toBe(0);
    const leftBefore = await leftOf(buildId);
    expect(leftBefore.images.length).toBeGreaterThanOrEqual(4);

    server = await startServer(dir, args);
    const after = ((await call(server.url, 'GET', '/images/builds')).body.data as { id: string; status: string; error: string | null; finished_at: string | null }[]).find((b) => b.id === buildId);
    expect(after).toMatchObject({ status: 'failed', error: 'the server stopped during the build', finished_at: expect.any(String) });
    expect(await leftOf(buildId)).toEqual({ containers: [], images: [] });
    for (const id of leftBefore.images) expect(await docker.getImage(id).inspect().then(() => true, () => false)).toBe(false);
    expect(await docker.getImage(`sandboxd-user/${name}:latest`).inspect().then(() => true, () => false)).toBe(false);
  });
});
