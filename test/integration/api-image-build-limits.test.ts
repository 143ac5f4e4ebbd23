import Dockerode from 'dockerode';
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, call, dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * The bounds of image builds on the real engine: a fork bomb in RUN is held at the pids limit
 * and stops the build; a step writing past the per-step bound, and steps past the per-build
 * bound, stop it; a build past the concurrency cap is refused (429); step containers run with
 * the CPU shares and under the build's cgroup. Each failure's log names the bound.
 */

let rt: DockerRuntime;
const docker = new Dockerode();
const run = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
const names: string[] = [];
const nameOf = (what: string) => {
  const name = `l${run}-${what}`;
  names.push(name);
  return name;
};
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0, buildPidsLimit: 64, buildStepDiskMb: 64, buildDiskMb: 100, buildConcurrency: 1, buildCpuShares: 300 });
});

afterAll(async () => {
  await rt?.dispose();
  for (const name of names) await docker.getImage(`sandboxd-user/${name}:latest`).remove().catch(() => undefined);
});

/** What the engine holds of a build, by its label: containers and images. */
async function leftOf(buildId: string): Promise<number> {
  const filters = JSON.stringify({ label: [`sandboxd.build=${buildId}`] });
  return (await docker.listContainers({ all: true, filters })).length + (await docker.listImages({ all: true, filters })).length;
}

/** The build of `name` as GET /images/builds shows it. */
async function buildOf(name: string): Promise<{ id: string; status: string; error: string | null }> {
  const list = (await api('GET', '/images/builds')).body.data as { id: string; name: string; status: string; error: string | null }[];
  const found = list.find((b) => b.name === name);
  if (!found) throw new Error(`no build of ${name}`);
  return found;
}

/** The largest pids.current of any build cgroup while `during` runs. */
async function peakBuildPids(during: Promise<unknown>): Promise<number> {
  let peak = 0;
  let done = false;
  void during.finally(() => (done = true));
  while (!done) {
    for (const dir of readdirSync('/sys/fs/cgroup/pids').filter((d) => d.startsWith('sandboxd-build-'))) {
      try {
        peak = Math.max(peak, Number(readFileSync(`/sys/fs/cgroup/pids/${dir}/pids.current`, 'utf8')));
      } catch {
        // Removed in between.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return peak;
}

describe('image build limits', () => {
  it('holds a fork bomb in RUN at the pids limit and fails the build naming it; the server stays fine', async () => {
    const name = nameOf('forkbomb');
    const build = api('POST', '/images', { name, dockerfile: `FROM ${BASE_IMAGE}\nRUN echo bombing; bomb() { bomb | bomb & }; bomb; sleep 600\n` });
    const peak = await peakBuildPids(build);
    const failed = await build;
    expect(failed.status, JSON.stringify(failed.body).slice(0, 500)).toBe(400);
    expect(failed.body.error).toMatch(/^the image build failed: step 3\/5 \(RUN echo bombing;.*\) reached the build's limit of 64 processes \(--build-pids-limit/);
    expect(failed.body.details.log).toMatch(/\nsandboxd: step 3\/5 .* reached the build's limit of 64 processes.*\n$/);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(64);
    const record = await buildOf(name);
    expect(record).toMatchObject({ status: 'failed', error: expect.stringContaining('limit of 64 processes') });
    await expect.poll(() => leftOf(record.id), { timeout: 30_000 }).toBe(0);
    expect(readdirSync('/sys/fs/cgroup/pids').filter((d) => d === `sandboxd-build-${record.id}`)).toEqual([]);
    expect((await api('GET', '/health')).status).toBe(200);
  });

  it('stops a step that writes past the per-step bound while it runs, naming the bound', async () => {
    const name = nameOf('bigstep');
    const failed = await api('POST', '/images', { name, dockerfile: `FROM ${BASE_IMAGE}\nRUN dd if=/dev/zero of=/tmp/big bs=1M count=100 && echo written && sleep 600\n` });
    expect(failed.status).toBe(400);
    expect(failed.body.error).toMatch(/^the image build failed: step 3\/5 \(RUN dd .*\) wrote 1\d\d MiB, past the limit of 64 MiB per step \(--build-step-disk-mb/);
    expect(failed.body.details.log).toContain('written');
    const record = await buildOf(name);
    await expect.poll(() => leftOf(record.id), { timeout: 30_000 }).toBe(0);
    expect(await docker.getImage(`sandboxd-user/${name}:latest`).inspect().then(() => true, () => false)).toBe(false);
  });

  it('stops a build whose steps together write past the per-build bound, after the step that passes it', async () => {
    const name = nameOf('bigbuild');
    const step = (n: number) => `RUN dd if=/dev/zero of=/tmp/part${n} bs=1M count=40 2>/dev/null && echo part-${n}`;
    const failed = await api('POST', '/images', { name, dockerfile: `FROM ${BASE_IMAGE}\n${step(1)}\n${step(2)}\n${step(3)}\nRUN sleep 5 && echo never-reached\n` });
    expect(failed.status).toBe(400);
    expect(failed.body.error).toMatch(/^the image build failed: the build's steps wrote 1[12]\d MiB, past the limit of 100 MiB per build \(--build-disk-mb/);
    expect(failed.body.details.log).toContain('part-3');
    // Stopped within a measurement of the step that passed the bound: the next step (which the
    // engine may have begun, its header `Step 6/8 : RUN sleep 5 && echo never-reached` in the log) never printed.
    expect(failed.body.details.log.split('\n')).not.toContain('never-reached');
    const record = await buildOf(name);
    await expect.poll(() => leftOf(record.id), { timeout: 30_000 }).toBe(0);
  });

  it('refuses a build past the concurrency cap with 429, runs steps with the CPU shares under the build cgroup, and admits again after', async () => {
    const name = nameOf('slow');
    const leave = new AbortController();
    const response = await fetch(`${rt.url}/images`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ name, dockerfile: `FROM ${BASE_IMAGE}\nRUN echo slow-step && sleep 600\n` }),
      signal: leave.signal,
    });
    let log = '';
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    // The step's own output (`slow-step` and a newline, escaped in the event's JSON), not the step's
    // header that names it: by then the log has named the step's container.
    while (!log.includes('slow-step\\n')) log += (await reader.read()).value ?? '';
    const refused = await api('POST', '/images', { name: nameOf('second'), dockerfile: `FROM ${BASE_IMAGE}\n` });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('BUSY');
    expect(refused.body.error).toMatch(/^1 image builds are running, the most at once \(--build-concurrency, \[images\]\.build_concurrency = 1\)/);

    const step = [...log.matchAll(/Running in ([0-9a-f]{12})/g)].at(-1)?.[1] ?? '';
    const info = await docker.getContainer(step).inspect();
    expect(info.HostConfig.CpuShares).toBe(300);
    const record = await buildOf(name);
    expect(record.status).toBe('running');
    expect(info.HostConfig.CgroupParent).toBe(`/sandboxd-build-${record.id}`);
    expect(readFileSync(`/sys/fs/cgroup/pids/sandboxd-build-${record.id}/pids.max`, 'utf8').trim()).toBe('64');

    leave.abort();
    await expect.poll(async () => (await buildOf(name)).status, { timeout: 30_000 }).toBe('failed');
    const again = await api('POST', '/images', { name: nameOf('after'), dockerfile: `FROM ${BASE_IMAGE}\nRUN echo fine\n` });
    expect(again.status, JSON.stringify(again.body).slice(0, 300)).toBe(201);
  });
});
