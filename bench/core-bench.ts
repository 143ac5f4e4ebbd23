import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);
/** The image every bench sandbox and plain container runs. */
export const BENCH_IMAGE = 'sandboxd/base:bookworm';

export interface Api {
  url: string;
}

/** POST through the API; throws with the server's message on failure. */
export async function post(api: Api, path: string, body?: unknown): Promise<any> {
  const res = await fetch(api.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? '' : JSON.stringify(body),
  });
  const json = (await res.json()) as { success: boolean; data: unknown; error?: string };
  if (!json.success) throw new Error(`${path}: ${json.error}`);
  return json.data;
}

export const del = (api: Api, path: string) => fetch(api.url + path, { method: 'DELETE' });

/** Create-to-running through the API against `docker run -d` of the same image. */
export async function benchCreate(api: Api, n: number, label = 'create-to-running (API)'): Promise<void> {
  const names: string[] = [];
  const ids: string[] = [];
  const { ours, plain } = await timePaired(
    n,
    async (i) => {
      const name = `bench-create-${process.pid}-${i < 0 ? `w${-i}` : i}`;
      names.push(name);
      await post(api, '/sandboxes', { name });
    },
    async () => {
      const { stdout } = await run('docker', ['run', '-d', '--init', BENCH_IMAGE, 'sleep', 'infinity']);
      ids.push(stdout.trim());
    },
  );
  await Promise.all(names.map((name) => del(api, `/sandboxes/${name}`)));
  await run('docker', ['rm', '-f', ...ids]);
  report(label, ours, plain, 'docker run -d');
}

/** exec of `true` through the API against a direct Engine API exec in a plain container. */
export async function benchExec(api: Api, n: number): Promise<void> {
  const name = `bench-exec-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const container = await plainContainer();
  const { ours, plain } = await timePaired(
    n,
    () => post(api, `/sandboxes/${name}/exec`, { command: ['true'] }),
    () => engineExec(container, ['true']),
    5,
  );
  await container.remove({ force: true });
  await del(api, `/sandboxes/${name}`);
  report('exec `true` (API)', ours, plain, 'Engine API exec');
}

/** Execs per second with 8 concurrent clients for 3 s, through the API, then through the Engine API. */
export async function benchExecRate(api: Api): Promise<void> {
  const name = `bench-rate-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const container = await plainContainer();
  const ours = await rate(8, 3_000, () => post(api, `/sandboxes/${name}/exec`, { command: ['true'] }));
  const plain = await rate(8, 3_000, () => engineExec(container, ['true']));
  await container.remove({ force: true });
  await del(api, `/sandboxes/${name}`);
  process.stdout.write(
    `${'exec `true`, 8 concurrent clients'.padEnd(40)} ${ours.toFixed(0).padStart(5)} execs/s | Engine API exec, 8 clients ${plain.toFixed(0).padStart(5)} execs/s | ratio ${(ours / plain).toFixed(1)}x\n`,
  );
}

/** 1 MiB file write and read through the API against the same through an Engine API exec of `cat`. */
export async function benchFiles(api: Api, n: number): Promise<void> {
  const name = `bench-files-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const container = await plainContainer();
  const content = randomBytes(1024 * 1024);
  const body = JSON.stringify({ content: content.toString('base64'), encoding: 'base64' });
  const write = await timePaired(
    n,
    async () => {
      const res = await fetch(`${api.url}/sandboxes/${name}/files/tmp/bench.bin`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body });
      if (!res.ok) throw new Error(`file write: HTTP ${res.status}`);
      await res.arrayBuffer();
    },
    () => engineExec(container, ['sh', '-c', 'cat > /tmp/bench.bin'], content),
  );
  const read = await timePaired(
    n,
    async () => {
      const res = await fetch(`${api.url}/sandboxes/${name}/files/tmp/bench.bin`);
      if (!res.ok) throw new Error(`file read: HTTP ${res.status}`);
      await res.json();
    },
    () => engineExec(container, ['cat', '/tmp/bench.bin']),
  );
  await container.remove({ force: true });
  await del(api, `/sandboxes/${name}`);
  report('1 MiB file write (API)', write.ours, write.plain, 'Engine API exec cat >');
  report('1 MiB file read (API)', read.ours, read.plain, 'Engine API exec cat');
}

/** A plain running container of BENCH_IMAGE, for the Engine API side of a comparison. */
async function plainContainer(): Promise<Docker.Container> {
  const container = await new Docker().createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', 'infinity'], HostConfig: { Init: true } });
  await container.start();
  return container;
}

/** One Engine API exec, to its end: output drained, exit code fetched. */
async function engineExec(container: Docker.Container, cmd: string[], stdin?: Buffer): Promise<void> {
  const exec = await container.exec({ Cmd: cmd, AttachStdin: stdin !== undefined, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: stdin !== undefined });
  await new Promise((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.resume();
    if (stdin) stream.end(stdin);
  });
  await exec.inspect();
}

/** Completed calls per second of `work` with `clients` concurrent callers for `ms`. */
async function rate(clients: number, ms: number, work: () => Promise<unknown>): Promise<number> {
  const until = performance.now() + ms;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        await work();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

/**
 * The API's own cost per exec: exec through a server on the fake backend (HTTP, validation,
 * state store, audit, serialisation; no engine), against a bare GET /health round trip.
 */
export async function benchApiOverhead(fakeApi: Api, n: number): Promise<void> {
  const name = `bench-overhead-${process.pid}`;
  await post(fakeApi, '/sandboxes', { name });
  const { ours, plain } = await timePaired(
    n,
    () => post(fakeApi, `/sandboxes/${name}/exec`, { command: ['true'] }),
    () => fetch(`${fakeApi.url}/health`).then((res) => res.json()),
    20,
  );
  await del(fakeApi, `/sandboxes/${name}`);
  report('exec, API path alone (fake backend)', ours, plain, 'GET /health round trip');
}
