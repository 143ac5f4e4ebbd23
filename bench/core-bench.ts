import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { json, send } from './http-client.js';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);
/** The image every bench sandbox and plain container runs. */
export const BENCH_IMAGE = 'sandboxd/base:bookworm';

export interface Api {
  url: string;
}

/** POST through the API; throws with the server's message on failure. */
export async function post(api: Api, path: string, body?: unknown): Promise<any> {
  const reply = json(await send('POST', api.url + path, body ?? '')) as { success: boolean; data: unknown; error?: string };
  if (!reply.success) throw new Error(`${path}: ${reply.error}`);
  return reply.data;
}

export const del = (api: Api, path: string) => send('DELETE', api.url + path);

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
    10,
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

/**
 * 1 MiB file write and read through the API, as raw bytes (application/octet-stream) and as
 * the JSON envelope with base64 content, against the same through an Engine API exec of `cat`.
 */
export async function benchFiles(api: Api, n: number): Promise<void> {
  const name = `bench-files-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const container = await plainContainer();
  const content = randomBytes(1024 * 1024);
  const url = `${api.url}/sandboxes/${name}/files/tmp/bench.bin`;
  const body = JSON.stringify({ content: content.toString('base64'), encoding: 'base64' });
  const octets = 'application/octet-stream';
  const checked = async (what: string, pending: Promise<Awaited<ReturnType<typeof send>>>) => {
    const res = await pending;
    if (res.status !== 200) throw new Error(`${what}: HTTP ${res.status} ${res.body.toString('utf8')}`);
    return res;
  };
  const plainWrite = () => engineExec(container, ['sh', '-c', 'cat > /tmp/bench.bin'], content);
  const plainRead = () => engineExec(container, ['cat', '/tmp/bench.bin']);
  // In blocks: an Engine API exec leaves work behind in the engine that slows the next call.
  const write = await timePaired(n, () => checked('raw file write', send('PUT', url, content, { 'content-type': octets })), plainWrite, 2, 5);
  const read = await timePaired(
    n,
    async () => {
      const res = await checked('raw file read', send('GET', url, undefined, { accept: octets }));
      if (res.body.length !== content.length) throw new Error(`raw file read: ${res.body.length} bytes`);
    },
    plainRead,
    2,
    5,
  );
  const writeJson = await timePaired(n, () => checked('file write', send('PUT', url, body)), plainWrite, 2, 5);
  const readJson = await timePaired(n, async () => json(await checked('file read', send('GET', url))), plainRead, 2, 5);
  await container.remove({ force: true });
  await del(api, `/sandboxes/${name}`);
  report('1 MiB file write (API, raw)', write.ours, write.plain, 'Engine API exec cat >');
  report('1 MiB file read (API, raw)', read.ours, read.plain, 'Engine API exec cat');
  report('1 MiB file write (API, JSON base64)', writeJson.ours, writeJson.plain, 'Engine API exec cat >');
  report('1 MiB file read (API, JSON base64)', readJson.ours, readJson.plain, 'Engine API exec cat');
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
    async () => json(await send('GET', `${fakeApi.url}/health`)),
    20,
  );
  await del(fakeApi, `/sandboxes/${name}`);
  report('exec, API path alone (fake backend)', ours, plain, 'GET /health round trip');
}
