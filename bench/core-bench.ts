import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { report, summarize, time } from './stats.js';

const run = promisify(execFile);
const IMAGE = 'sandboxd/base:bookworm';

interface Api {
  url: string;
}

async function post(api: Api, path: string, body?: unknown): Promise<any> {
  const res = await fetch(api.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? '' : JSON.stringify(body),
  });
  const json = (await res.json()) as { success: boolean; data: unknown; error?: string };
  if (!json.success) throw new Error(`${path}: ${json.error}`);
  return json.data;
}

const del = (api: Api, path: string) => fetch(api.url + path, { method: 'DELETE' });

/** Create-to-running through the API against `docker run -d` of the same image. */
export async function benchCreate(api: Api, n: number): Promise<void> {
  const names: string[] = [];
  const ours = await time(n, async (i) => {
    const name = `bench-create-${process.pid}-${i < 0 ? `w${-i}` : i}`;
    names.push(name);
    await post(api, '/sandboxes', { name });
  });
  await Promise.all(names.map((name) => del(api, `/sandboxes/${name}`)));
  const ids: string[] = [];
  const plain = await time(n, async () => {
    const { stdout } = await run('docker', ['run', '-d', '--init', IMAGE, 'sleep', 'infinity']);
    ids.push(stdout.trim());
  });
  await run('docker', ['rm', '-f', ...ids]);
  report('create-to-running (API)', summarize(ours), summarize(plain), 'docker run -d');
}

/** exec of `true` through the API against a direct Engine API exec in a plain container. */
export async function benchExec(api: Api, n: number): Promise<void> {
  const name = `bench-exec-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const ours = await time(n, () => post(api, `/sandboxes/${name}/exec`, { command: ['true'] }), 5);
  await del(api, `/sandboxes/${name}`);

  const docker = new Docker();
  const container = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', 'infinity'], HostConfig: { Init: true } });
  await container.start();
  const plain = await time(
    n,
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
  report('exec `true` (API)', summarize(ours), summarize(plain), 'Engine API exec');
}
