import fc from 'fast-check';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { docker, removeInstanceContainers } from '../helpers/docker.js';
import { BASE_IMAGE, dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';
import { fakeHarness, type FakeHarness } from '../helpers/fake-app.js';
import { requestArbitrary, type FuzzRequest, type KnownNames, type OpenApiDocument } from './api-requests.js';

/**
 * The fuzz test (`npm run fuzz`): generated requests across every route of /openapi.json against
 * a real HTTP server in this process. The bulk (FUZZ_RUNS, default 10,000) goes to the fake
 * backend; a subset (FUZZ_DOCKER_RUNS, default 1,000; 0 skips it) to the Docker backend, where the
 * engine sees what gets through. It fails on any 5xx (a preview's 502 for a port where nothing
 * listens is the proxy's answer, not a fault), on any uncaught exception or unhandled
 * rejection (vitest fails the run on them; in-process, a crash of the server is a crash of
 * this run), on zod's own wording in an error, and on any request that takes longer than its
 * deadline (a hang). FUZZ_SEED re-runs a sequence; the seed is printed at the start.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const DOCKER_RUNS = Number(process.env.FUZZ_DOCKER_RUNS ?? 1000);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);
/** A request that has no answer by then hangs (an exec of a generated command ends well before). */
const DEADLINE_MS = { fake: 10_000, docker: 60_000 };

/** zod's own wording, which never reaches a client. */
const ZOD_WORDING = /Invalid input|expected [a-z]+, received|Too (small|big)|Invalid (string|option|element|key)|Unrecognized key/;

process.stdout.write(`fuzz: seed ${SEED} (re-run with FUZZ_SEED=${SEED}), ${RUNS} requests on the fake backend, ${DOCKER_RUNS} on Docker\n`);

/**
 * A preview route forwards to a port inside the sandbox: where nothing listens there, its
 * answer is 502 BAD_GATEWAY, as a proxy's is (docs/api-and-errors.md), not a fault of the
 * server. Only that answer, on those routes, is not a failure.
 */
function upstreamRefused(request: FuzzRequest, status: number, text: string): boolean {
  if (status !== 502 || !request.route.includes('/ports/{port}')) return false;
  try {
    return (JSON.parse(text) as { code?: unknown }).code === 'BAD_GATEWAY';
  } catch {
    return false;
  }
}

/** Sends one request; throws on a 5xx (but a preview's 502 for a port nothing listens on), zod wording, or no answer within the deadline. */
async function send(base: string, request: FuzzRequest, deadlineMs: number): Promise<number> {
  const label = `${request.method} ${request.path.slice(0, 200)} (route ${request.route})`;
  let res: Response;
  try {
    res = await fetch(base + request.path, {
      method: request.method,
      headers: request.headers,
      ...(request.body !== undefined ? { body: request.body } : {}),
      signal: AbortSignal.timeout(deadlineMs),
    });
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') throw new Error(`hang: no answer within ${deadlineMs} ms to ${label}`);
    // The client refused to send it (e.g. a URL it cannot form): nothing reached the server.
    if ((err as Error).name === 'TypeError' && !String((err as Error).cause ?? '').includes('ECONN')) return 0;
    throw new Error(`${label}: ${(err as Error).message} (${String((err as Error).cause)})`);
  }
  let text = '';
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    // GET /events never ends: its headers are the answer.
    await res.body?.cancel();
  } else {
    try {
      text = await res.text();
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') throw new Error(`hang: the body of ${label} did not end within ${deadlineMs} ms`);
      throw err;
    }
  }
  if (res.status >= 500 && !upstreamRefused(request, res.status, text)) throw new Error(`${res.status} for ${label}: ${text.slice(0, 500)}\nbody sent: ${String(request.body).slice(0, 300)}`);
  if (res.status >= 400 && ZOD_WORDING.test(text)) throw new Error(`zod's wording in the answer to ${label}: ${text.slice(0, 300)}`);
  return res.status;
}

/** Makes the named sandboxes and snapshots exist (and run) again, whatever the requests did to them. */
async function restock(base: string, known: KnownNames, image?: string): Promise<void> {
  const post = (path: string, body?: object) =>
    fetch(base + path, {
      method: 'POST',
      ...(body ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
    }).then((res) => res.text());
  for (const name of known.sandboxes) {
    await post('/sandboxes', { name, ...(image ? { image } : {}) });
    await post(`/sandboxes/${name}/recover`);
    await post(`/sandboxes/${name}/start`);
  }
  for (const name of known.snapshots) await post('/snapshots', { sandbox: known.sandboxes[0]!, name });
}

/** Runs `runs` generated requests against the server at `base`; a tally of statuses by route. */
async function fuzz(base: string, known: KnownNames, runs: number, deadlineMs: number, image?: string): Promise<Map<string, number>> {
  const doc = (await (await fetch(`${base}/openapi.json`)).json()) as OpenApiDocument;
  const statuses = new Map<string, number>();
  const routes = new Set<string>();
  let sent = 0;
  await restock(base, known, image);
  await fc.assert(
    fc.asyncProperty(requestArbitrary(doc, known), async (request) => {
      if (++sent % 100 === 0) await restock(base, known, image);
      const status = await send(base, request, deadlineMs);
      routes.add(`${request.method} ${request.route}`);
      const key = `${Math.floor(status / 100)}xx`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }),
    // No shrinking: the first failing request, as generated, is the report.
    { numRuns: runs, seed: SEED, endOnFailure: true, verbose: 1 },
  );
  statuses.set('routes', routes.size);
  return statuses;
}

describe('fuzzing every route', () => {
  let h: FakeHarness | undefined;
  let runtime: DockerRuntime | undefined;
  afterAll(async () => {
    await h?.close();
    if (runtime) {
      await runtime.dispose();
      await removeInstanceContainers(runtime.deploymentId);
    }
  });

  it(`answers ${RUNS} generated requests on the fake backend without a 5xx, a crash or a hang`, async () => {
    h = await fakeHarness({ poolSize: 1, maxSandboxes: 12 }, undefined, { enabled: true, backlog: 100, webhookUrls: [] });
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const statuses = await fuzz(base, { sandboxes: ['fz-a', 'fz-b'], snapshots: ['fz-snap'], images: ['sandboxd/base:bookworm'] }, RUNS, DEADLINE_MS.fake);
    process.stdout.write(`fuzz (fake): ${JSON.stringify(Object.fromEntries(statuses))}\n`);
    expect([...statuses].filter(([key]) => key.endsWith('xx')).reduce((sum, [, count]) => sum + count, 0)).toBe(RUNS);
    expect((await fetch(`${base}/health`)).status).toBe(200);
  }, 600_000);

  it.skipIf(DOCKER_RUNS === 0)(`answers ${DOCKER_RUNS} generated requests on the Docker backend, and leaves no container`, async () => {
    runtime = await dockerRuntime({ poolSize: 0, maxSandboxes: 6, events: true, defaultImage: BASE_IMAGE });
    const known = { sandboxes: ['fzd-a', 'fzd-b'], snapshots: ['fzd-snap'], images: [BASE_IMAGE] };
    const statuses = await fuzz(runtime.url, known, DOCKER_RUNS, DEADLINE_MS.docker, BASE_IMAGE);
    process.stdout.write(`fuzz (docker): ${JSON.stringify(Object.fromEntries(statuses))}\n`);
    expect((await fetch(`${runtime.url}/health`)).status).toBe(200);
    const instanceId = runtime.deploymentId;
    await runtime.dispose();
    await removeInstanceContainers(instanceId);
    runtime = undefined;
    expect(await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`)).toBe('');
  }, 600_000);
});
