import { execFile } from 'node:child_process';
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
export async function benchCreate(api: Api, n: number): Promise<void> {
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
  report('create-to-running (API)', ours, plain, 'docker run -d');
}

/** exec of `true` through the API against a direct Engine API exec in a plain container. */
export async function benchExec(api: Api, n: number): Promise<void> {
  const name = `bench-exec-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const docker = new Docker();
  const container = await docker.createContainer({ Image: BENCH_IMAGE, Cmd: ['sleep', 'infinity'], HostConfig: { Init: true } });
  await container.start();
  const { ours, plain } = await timePaired(
    n,
    () => post(api, `/sandboxes/${name}/exec`, { command: ['true'] }),
    async () => {
      const exec = await container.exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true });
      const stream = await exec.start({ hijack: true, stdin: false });
      await new Promise((resolve) => {
        stream.on('end', resolve);
        stream.resume();
      });
      await exec.inspect();
    },
    5,
  );
  await container.remove({ force: true });
  await del(api, `/sandboxes/${name}`);
  report('exec `true` (API)', ours, plain, 'Engine API exec');
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
