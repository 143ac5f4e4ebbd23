import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

let rt: DockerRuntime;
let sudoRt: DockerRuntime;
const name = uniqueName('exec');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);
const exec = async (body: object) => {
  const res = await api('POST', `/sandboxes/${name}/exec`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};

beforeAll(async () => {
  rt = await dockerRuntime();
  sudoRt = await dockerRuntime({ allowSudoExec: true });
  expect((await api('POST', '/sandboxes', { name, env: { FROM_CREATE: 'c' } })).status).toBe(201);
});
afterAll(async () => {
  await rt?.dispose();
  await sudoRt?.dispose();
});

/** A request sent byte for byte, so `..` reaches the server unnormalised. */
function rawRequest(method: string, path: string, body?: string): Promise<{ status: number; body: any }> {
  const url = new URL(rt.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method, path, headers: body ? { 'content-type': 'application/json' } : {} },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('exec', () => {
  it('returns output, exit codes and the arrival order of stdout and stderr', async () => {
    expect(await exec({ command: ['echo', 'hi'] })).toMatchObject({
      output: 'hi\n',
      stdout: 'hi\n',
      stderr: '',
      exit_code: 0,
      timed_out: false,
      truncated: false,
    });
    expect((await exec({ command: ['sh', '-c', 'exit 7'] })).exit_code).toBe(7);
    const ordered = await exec({ command: ['sh', '-c', 'echo 1; sleep 0.05; echo 2 >&2; sleep 0.05; echo 3; sleep 0.05; echo 4 >&2'] });
    expect(ordered).toMatchObject({ output: '1\n2\n3\n4\n', stdout: '1\n3\n', stderr: '2\n4\n' });
    const missing = await exec({ command: ['no-such-command'] });
    expect(missing.exit_code).toBe(127);
    expect(typeof missing.duration_ms).toBe('number');
  });

  it('feeds stdin, sets env (object or K=V array, over the create env) and workdir', async () => {
    expect((await exec({ command: ['cat'], stdin: 'from stdin\n' })).output).toBe('from stdin\n');
    expect((await exec({ command: ['wc', '-c'], stdin: '' })).output.trim()).toBe('0');
    expect((await exec({ command: ['sh', '-c', 'echo $A-$FROM_CREATE'], env: { A: 'obj' } })).output).toBe('obj-c\n');
    expect((await exec({ command: ['sh', '-c', 'echo $A $B'], env: ['A=x=y', 'B='] })).output).toBe('x=y\n');
    expect((await exec({ command: ['pwd'] })).output).toBe('/workspace\n');
    expect((await exec({ command: ['pwd'], workdir: '/tmp' })).output).toBe('/tmp\n');
  });

  it('runs as the sandbox user, and as root with sudo only when the server allows it', async () => {
    expect((await exec({ command: ['id', '-un'] })).output).toBe('sandbox\n');
    const refused = await api('POST', `/sandboxes/${name}/exec`, { command: ['id', '-u'], sudo: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toContain('allow_sudo_exec');
    // Every way to allow it: the flag, the environment variable and the config key.
    expect(refused.body.error).toContain('--allow-sudo-exec');
    expect(refused.body.error).toContain('SERVICE_ALLOW_SUDO_EXEC=true');
    const sudoName = uniqueName('sudo');
    await call(sudoRt.url, 'POST', '/sandboxes', { name: sudoName });
    const asRoot = await call(sudoRt.url, 'POST', `/sandboxes/${sudoName}/exec`, { command: ['id', '-u'], sudo: true });
    expect(asRoot.body.data.output).toBe('0\n');
    const logs = (await call(sudoRt.url, 'GET', `/sandboxes/${sudoName}/logs`)).body.data;
    expect(logs.at(-1)).toMatchObject({ event: 'command_executed', sudo: true });
  });

  it('never runs a command as root without sudo, also in an image whose default user is root', async () => {
    // Built here from the base image: no registry is involved.
    const image = `sandboxd-test/root-user:${uniqueName('t')}`;
    execFileSync('docker', ['build', '-q', '-t', image, '-'], { input: `FROM ${BASE_IMAGE}\nUSER root\n` });
    const rootName = uniqueName('root-image');
    try {
      for (const [runtime, profile] of [[rt, 'moderate'], [sudoRt, 'restrictive']] as const) {
        const created = await call(runtime.url, 'POST', '/sandboxes', { name: `${rootName}-${profile}`, image, profile });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        const plain = await call(runtime.url, 'POST', `/sandboxes/${rootName}-${profile}/exec`, { command: ['sh', '-c', 'id -u; touch /workspace/mine && python3 -c "import os; print(os.stat(\'/workspace/mine\').st_uid)"'] });
        expect(plain.body.data.output, profile).toBe('65534\n65534\n');
      }
      expect((await call(rt.url, 'POST', `/sandboxes/${rootName}-moderate/exec`, { command: ['id', '-u'], sudo: true })).status).toBe(403);
      expect((await call(sudoRt.url, 'POST', `/sandboxes/${rootName}-restrictive/exec`, { command: ['id', '-u'], sudo: true })).body.data.output).toBe('0\n');
    } finally {
      await api('DELETE', `/sandboxes/${rootName}-moderate`);
      await call(sudoRt.url, 'DELETE', `/sandboxes/${rootName}-restrictive`);
      execFileSync('docker', ['rmi', '-f', image]);
    }
  });

  it('says oom_killed when the kernel ends a command that goes past the memory limit', async () => {
    const small = uniqueName('oom');
    expect((await api('POST', '/sandboxes', { name: small, memory_mb: 64 })).status).toBe(201);
    try {
      const hog = await api('POST', `/sandboxes/${small}/exec`, { command: ['python3', '-c', 'x = bytearray(256 * 1024 * 1024)'] });
      expect(hog.body.data).toMatchObject({ exit_code: 137, oom_killed: true });
      // A command killed otherwise is no OOM kill.
      const killed = await api('POST', `/sandboxes/${small}/exec`, { command: ['sh', '-c', 'kill -9 $$'] });
      expect(killed.body.data.exit_code).toBe(137);
      expect(killed.body.data).not.toHaveProperty('oom_killed');
    } finally {
      await api('DELETE', `/sandboxes/${small}`);
    }
  });

  it('kills a command at its timeout and returns the partial output', async () => {
    const started = Date.now();
    const result = await exec({ command: ['sh', '-c', 'echo before; sleep 30 & sleep 30; echo never'], timeout_ms: 1500 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(result).toMatchObject({ output: 'before\n', exit_code: 124, timed_out: true });
    const left = await exec({ command: ['sh', '-c', 'ps -eo args= | grep -c "^sleep 30$" || true'] });
    expect(left.output.trim()).toBe('0');
  });

  it('kills the command of a client that disconnects', async () => {
    const abort = new AbortController();
    const pending = fetch(`${rt.url}/sandboxes/${name}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: ['sh', '-c', 'sleep 41; echo done'] }),
      signal: abort.signal,
    }).catch((err: Error) => err.name);
    const count = async () => (await exec({ command: ['sh', '-c', 'ps -eo args= | grep -c "^sleep 41$" || true'] })).output.trim();
    for (let i = 0; i < 50 && (await count()) !== '1'; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await count()).toBe('1');
    abort.abort();
    expect(await pending).toBe('AbortError');
    for (let i = 0; i < 50 && (await count()) !== '0'; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await count()).toBe('0');
  });

  it('keeps a runaway writer from flooding the server', async () => {
    const result = await exec({ command: ['sh', '-c', 'head -c 20000000 /dev/zero | tr "\\0" x'], timeout_ms: 60_000 });
    expect(result.truncated).toBe(true);
    expect(result.output.length).toBeLessThanOrEqual(8 * 1024 * 1024);
  });

  it('refuses bad exec bodies with 400', async () => {
    for (const [body, message] of [
      [{}, 'command: is required'],
      [{ command: 'ls' }, 'command: must be a non-empty array of strings'],
      [{ command: [] }, 'command: must be a non-empty array of strings'],
      [{ command: [1] }, 'command[0]: must be a non-empty array of strings'],
      [{ command: ['ls'], timeout_ms: 0 }, 'timeout_ms'],
      [{ command: ['ls'], env: 'A=1' }, 'env: must be an object of strings or an array of NAME=value strings'],
      [{ command: ['ls'], workdir: 'relative' }, "workdir: 'relative' must be an absolute path"],
      [{ command: ['ls'], sudo: 'yes' }, 'sudo'],
    ] as const) {
      const res = await api('POST', `/sandboxes/${name}/exec`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toContain(message);
    }
  });
});

describe('files', () => {
  it('round-trips text and every byte value, and reports sizes', async () => {
    const put = await api('PUT', `/sandboxes/${name}/files/workspace/deep/dir/hello.txt`, { content: 'héllo wörld\n' });
    expect(put.body.data).toBe('wrote 14 bytes to /workspace/deep/dir/hello.txt');
    expect((await api('GET', `/sandboxes/${name}/files/workspace/deep/dir/hello.txt`)).body.data).toEqual({
      content: 'héllo wörld\n',
      encoding: 'utf8',
      size: 14,
    });
    const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(100_000)]);
    await api('PUT', `/sandboxes/${name}/files/tmp/blob.bin`, { content: bytes.toString('base64'), encoding: 'base64' });
    const back = (await api('GET', `/sandboxes/${name}/files/tmp/blob.bin`)).body.data;
    expect(back.encoding).toBe('base64');
    expect(back.size).toBe(bytes.length);
    expect(Buffer.from(back.content, 'base64').equals(bytes)).toBe(true);
    const owner = await exec({ command: ['stat', '-c', '%U', '/workspace/deep/dir/hello.txt', '/workspace/deep'] });
    expect(owner.output).toBe('sandbox\nsandbox\n');
  });

  it('writes several files at once and deletes files and directories', async () => {
    const res = await api('POST', `/sandboxes/${name}/files`, { files: { 'multi/a.py': 'print(1)', '/workspace/multi/b.txt': 'b' } });
    expect(res.body.data).toEqual({ written: 2 });
    expect((await exec({ command: ['python3', 'multi/a.py'] })).output).toBe('1\n');
    expect((await api('DELETE', `/sandboxes/${name}/files/workspace/multi/b.txt`)).body.data).toBe('deleted /workspace/multi/b.txt');
    expect((await api('GET', `/sandboxes/${name}/files/workspace/multi/b.txt`)).status).toBe(404);
    expect((await api('DELETE', `/sandboxes/${name}/files/workspace/multi`)).status).toBe(200);
    expect((await api('GET', `/sandboxes/${name}/files/workspace/multi/a.py`)).status).toBe(404);
  });

  it('answers 404 for missing files, 400 for directories and 403 where the sandbox user may not write', async () => {
    const missing = await api('GET', `/sandboxes/${name}/files/workspace/nope.txt`);
    expect(missing).toMatchObject({ status: 404, body: { success: false, code: 'NOT_FOUND' } });
    expect((await api('DELETE', `/sandboxes/${name}/files/workspace/nope.txt`)).status).toBe(404);
    const directory = await api('GET', `/sandboxes/${name}/files/workspace`);
    expect(directory.status).toBe(400);
    // The path is said once.
    expect(directory.body.error).toBe(`'/workspace' is a directory: list it with GET /sandboxes/${name}/fs?path=/workspace`);
    expect((await api('PUT', `/sandboxes/${name}/files/etc/forbidden`, { content: 'x' })).status).toBe(403);
    expect((await api('GET', `/sandboxes/${name}/files/etc/shadow`)).status).toBe(403);
  });

  it('refuses to read a FIFO or a device, naming the path and its type, instead of hanging', async () => {
    await exec({ command: ['mkfifo', '/workspace/pipe'] });
    const fifo = await api('GET', `/sandboxes/${name}/files/workspace/pipe`);
    expect(fifo.status).toBe(400);
    expect(fifo.body.error).toContain("'/workspace/pipe' is a FIFO, not a regular file");
    const device = await api('GET', `/sandboxes/${name}/files/dev/zero`);
    expect(device.status).toBe(400);
    expect(device.body.error).toContain("'/dev/zero' is a character device");
    // The sandbox is still answering: nothing was left waiting on the FIFO.
    expect((await exec({ command: ['echo', 'alive'] })).output).toBe('alive\n');
  });

  it('refuses path traversal however it is spelled', async () => {
    for (const path of ['/workspace/../etc/passwd', '/workspace/%2e%2e/etc/passwd', '/..%2f..%2fetc/passwd', '/a/%00b']) {
      const res = await rawRequest('GET', `/sandboxes/${name}/files${path}`);
      expect(res.status, path).toBe(400);
      expect(res.body.success).toBe(false);
    }
    const put = await rawRequest('PUT', `/sandboxes/${name}/files/workspace/../../tmp/x`, JSON.stringify({ content: 'x' }));
    expect(put.status).toBe(400);
    const multi = await api('POST', `/sandboxes/${name}/files`, { files: { '../../etc/x': 'x' } });
    expect(multi.status).toBe(400);
  });

  it('refuses bad file bodies and bodies over 16 MiB', async () => {
    expect((await api('PUT', `/sandboxes/${name}/files/tmp/x`, {})).body.error).toContain('content: is required');
    expect((await api('PUT', `/sandboxes/${name}/files/tmp/x`, { content: 'x', encoding: 'hex' })).status).toBe(400);
    expect((await api('PUT', `/sandboxes/${name}/files/tmp/x`, { content: '!!', encoding: 'base64' })).body.error).toContain('base64');
    const big = await api('PUT', `/sandboxes/${name}/files/tmp/big`, { content: 'x'.repeat(16 * 1024 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('takes and gives raw bytes with application/octet-stream, as the sandbox user', async () => {
    const RAW = 'application/octet-stream';
    const url = `${rt.url}/sandboxes/${name}/files/workspace/raw/blob.bin`;
    const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(3 * 1024 * 1024)]);
    const put = await fetch(url, { method: 'PUT', headers: { 'content-type': RAW }, body: bytes });
    expect(await put.json()).toEqual({ success: true, data: `wrote ${bytes.length} bytes to /workspace/raw/blob.bin` });
    const get = await fetch(url, { headers: { accept: RAW } });
    expect(get.status).toBe(200);
    expect(get.headers.get('content-type')).toBe(RAW);
    expect(Buffer.from(await get.arrayBuffer()).equals(bytes)).toBe(true);
    const json = (await api('GET', `/sandboxes/${name}/files/workspace/raw/blob.bin`)).body.data;
    expect(Buffer.from(json.content, 'base64').equals(bytes)).toBe(true);
    expect((await exec({ command: ['stat', '-c', '%U', '/workspace/raw/blob.bin', '/workspace/raw'] })).output).toBe('sandbox\nsandbox\n');
    const empty = await fetch(`${rt.url}/sandboxes/${name}/files/tmp/empty`, { method: 'PUT', headers: { 'content-type': RAW }, body: Buffer.alloc(0) });
    expect(((await empty.json()) as { data: unknown }).data).toBe('wrote 0 bytes to /tmp/empty');
    expect((await exec({ command: ['stat', '-c', '%s', '/tmp/empty'] })).output).toBe('0\n');
  });

  it('keeps raw-bytes failures in the JSON envelope', async () => {
    const RAW = 'application/octet-stream';
    const files = `${rt.url}/sandboxes/${name}/files`;
    const forbidden = await fetch(`${files}/etc/forbidden`, { method: 'PUT', headers: { 'content-type': RAW }, body: Buffer.from('x') });
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ success: false, code: 'FORBIDDEN' });
    const shadow = await fetch(`${files}/etc/shadow`, { headers: { accept: RAW } });
    expect(shadow.status).toBe(403);
    expect(shadow.headers.get('content-type')).toContain('application/json');
    const missing = await fetch(`${files}/workspace/nope.bin`, { headers: { accept: RAW } });
    expect(await missing.json()).toMatchObject({ success: false, code: 'NOT_FOUND', error: "file '/workspace/nope.bin' not found" });
    expect((await fetch(`${files}/workspace`, { headers: { accept: RAW } })).status).toBe(400);
    const big = await fetch(`${files}/tmp/big`, { method: 'PUT', headers: { 'content-type': RAW }, body: Buffer.alloc(16 * 1024 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { code: unknown }).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('round-trips a file of nearly 16 MiB of binary', async () => {
    const bytes = randomBytes(11 * 1024 * 1024);
    const put = await api('PUT', `/sandboxes/${name}/files/tmp/large.bin`, { content: bytes.toString('base64'), encoding: 'base64' });
    expect(put.status).toBe(200);
    const back = (await api('GET', `/sandboxes/${name}/files/tmp/large.bin`)).body.data;
    expect(Buffer.from(back.content, 'base64').equals(bytes)).toBe(true);
  });
});
