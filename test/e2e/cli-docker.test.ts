import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, uniqueName } from '../helpers/docker-runtime.js';
import { CLI, runCli, startServer, type ServerProcess } from '../helpers/server-process.js';

const ESC = '\u001b';

/** Every file under `root` (relative path -> bytes), directories included as empty entries. */
function tree(root: string): Record<string, Buffer | 'dir'> {
  const found: Record<string, Buffer | 'dir'> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) {
        found[relative(root, path)] = 'dir';
        walk(path);
      } else found[relative(root, path)] = readFileSync(path);
    }
  };
  walk(root);
  return found;
}

/**
 * `sandboxd exec`, `run` and `cp` against a server on the real Docker engine: output streamed
 * to the right stream as it comes, the command's exit code, bytes that cross unchanged; and the
 * settings of `sandbox create` that only a real engine shows working (volumes, the disk bound).
 */
describe('sandboxd exec, run and cp (Docker)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-docker-'));
  const local = mkdtempSync(join(tmpdir(), 'sandboxd-cli-local-'));
  const box = uniqueName('cli-box');
  let server: ServerProcess;
  const cli = async (...args: string[]) => {
    const result = await runCli(['--server', server.url, ...args], { SERVICE_URL: '' });
    expect(result.stdout + result.stderr, 'no escape codes when piped').not.toContain(ESC);
    return result;
  };

  beforeAll(async () => {
    server = await startServer(dataDir, ['--pool-size', '0']);
    const created = await cli('sandbox', 'create', box);
    expect(created.code, created.stderr).toBe(0);
  });
  afterAll(async () => {
    if (server) await call(server.url, 'DELETE', `/sandboxes/${box}`);
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(local, { recursive: true, force: true });
  });

  it("streams stdout to stdout and stderr to stderr, and exits with the command's exit code", async () => {
    const result = await cli('exec', box, '--', 'sh', '-c', 'echo out; echo err >&2; echo more; exit 7');
    expect(result).toEqual({ code: 7, stdout: 'out\nmore\n', stderr: 'err\n' });
    const options = await cli('exec', box, '--workdir', '/tmp', '--env', 'GREETING=hi there', '--', 'sh', '-c', 'echo "$GREETING in $(pwd)"');
    expect(options).toEqual({ code: 0, stdout: 'hi there in /tmp\n', stderr: '' });
    const json = await cli('exec', box, '--json', '--', 'sh', '-c', 'echo j; exit 3');
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({ exit_code: 3, stdout: 'j\n', timed_out: false });
    // sudo is refused by this server: the API's message, exit 1.
    const sudo = await cli('exec', box, '--sudo', '--', 'id');
    expect(sudo.code).toBe(1);
    expect(sudo.stderr).toContain('sudo exec is disabled');
  });

  it('sends standard input to the command with -i', async () => {
    const child = spawn(process.execPath, [CLI, 'exec', '-i', box, '--server', server.url, '--', 'sh', '-c', 'tr a-z A-Z; exit 2'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stdin.end('hello\nworld\n');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, stdout }).toEqual({ code: 2, stdout: 'HELLO\nWORLD\n' });
  });

  it('prints output before the command ends, and Ctrl-C ends the command (exit 130)', async () => {
    const child = spawn(process.execPath, [CLI, 'exec', box, '--server', server.url, '--', 'sh', '-c', 'echo first; sleep 600; echo never'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('first\n')) resolve();
      }),
    );
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(130);
    expect(stdout).toBe('first\n');
    // The command was killed with its connection: no sleep is left in the sandbox.
    const ps = await cli('exec', box, '--', 'sh', '-c', 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\\0" " "; echo; done');
    expect(ps.stdout).not.toContain('sleep 600');
  });

  it("runs a command in a fresh sandbox through /run/stream, with the command's exit code", async () => {
    const result = await cli('run', '--', 'sh', '-c', 'echo ran; echo oops >&2; exit 4');
    expect(result).toEqual({ code: 4, stdout: 'ran\n', stderr: 'oops\n' });
    const json = await cli('--json', 'run', '--image', 'sandboxd/base:bookworm', '--', 'echo', 'hi');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
  });

  it('copies a file both ways byte for byte', async () => {
    const bytes = randomBytes(300_000);
    writeFileSync(join(local, 'blob.bin'), bytes);
    expect(await cli('cp', join(local, 'blob.bin'), `${box}:/workspace/blob.bin`)).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const sum = await cli('exec', box, '--', 'sha256sum', '/workspace/blob.bin');
    expect(sum.stdout.split(' ')[0]).toBe((await import('node:crypto')).createHash('sha256').update(bytes).digest('hex'));
    expect((await cli('cp', `${box}:/workspace/blob.bin`, join(local, 'back.bin'))).code).toBe(0);
    expect(readFileSync(join(local, 'back.bin')).equals(bytes)).toBe(true);
    // Into an existing directory, under the source's name; --json says what was copied.
    mkdirSync(join(local, 'into'));
    const json = await cli('cp', '--json', `${box}:/workspace/blob.bin`, join(local, 'into'));
    expect(JSON.parse(json.stdout)).toMatchObject({ copied: 'file', to: join(local, 'into', 'blob.bin') });
    expect(readFileSync(join(local, 'into', 'blob.bin')).equals(bytes)).toBe(true);
    // A missing file: the API's message, exit 1.
    const missing = await cli('cp', `${box}:/workspace/nothing`, join(local, 'nothing'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: /);
  });

  it('copies a directory both ways as tar, every file byte for byte, one audit entry per copy', async () => {
    const source = join(local, 'project');
    mkdirSync(join(source, 'src', 'deep'), { recursive: true });
    mkdirSync(join(source, 'empty'));
    writeFileSync(join(source, 'README.md'), '# hello\n');
    writeFileSync(join(source, 'src', 'main.py'), 'print("hi")\n');
    writeFileSync(join(source, 'src', 'deep', 'data.bin'), randomBytes(100_000));
    writeFileSync(join(source, 'src', 'deep', 'blank'), '');
    const logged = async () => (JSON.parse((await cli('logs', box, '--json')).stdout) as Array<{ event: string; path?: string; direction?: string }>);
    const before = (await logged()).length;
    expect(await cli('cp', source, `${box}:/workspace/project`)).toMatchObject({ code: 0, stderr: '' });
    const back = join(local, 'project-back');
    expect(await cli('cp', `${box}:/workspace/project`, back)).toMatchObject({ code: 0, stderr: '' });
    expect(tree(back)).toEqual(tree(source));
    // One audit entry per copy, none of the plumbing (no command, no file in the sandbox's /tmp).
    expect((await logged()).slice(before).map(({ event, path, direction }) => ({ event, path, direction }))).toEqual([
      { event: 'copied', path: '/workspace/project', direction: 'in' },
      { event: 'copied', path: '/workspace/project', direction: 'out' },
    ]);
    const listed = await cli('exec', box, '--', 'sh', '-c', 'cd /workspace/project && find . | sort; ls -A /tmp | grep -c sandboxd-cp');
    expect(listed.stdout.split('\n').filter(Boolean)).toEqual(['.', './README.md', './empty', './src', './src/deep', './src/deep/blank', './src/deep/data.bin', './src/main.py', '0']);
  });

  it('creates sandboxes with --volume and --disk: the bound holds, and the volume outlives its sandbox', async () => {
    const volume = uniqueName('cli-vol');
    const [first, second] = [uniqueName('cli-vol-a'), uniqueName('cli-vol-b')];
    try {
      expect(await cli('volume', 'create', volume)).toMatchObject({ code: 0, stderr: '' });
      const created = await cli('sandbox', 'create', first, '--volume', `${volume}:/data`, '--disk', '128', '--json');
      expect(created.code, created.stderr).toBe(0);
      expect(JSON.parse(created.stdout)).toMatchObject({ disk_mb: 128, volumes: [{ name: volume, path: '/data' }] });
      expect(await cli('exec', first, '--', 'sh', '-c', 'echo kept > /data/note.txt')).toEqual({ code: 0, stdout: '', stderr: '' });
      const fill = await cli('exec', first, '--', 'dd', 'if=/dev/zero', 'of=/workspace/fill', 'bs=1M', 'count=384');
      expect(fill.code).not.toBe(0);
      expect(fill.stderr).toMatch(/Disk quota exceeded|No space left on device/);
      expect(await cli('sandbox', 'rm', first)).toMatchObject({ code: 0 });

      expect(await cli('sandbox', 'create', second, '--volume', `${volume}:/data:ro`)).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^volumes: +${volume}:/data:ro$`, 'm')) });
      expect(await cli('exec', second, '--', 'cat', '/data/note.txt')).toEqual({ code: 0, stdout: 'kept\n', stderr: '' });
      const write = await cli('exec', second, '--', 'sh', '-c', 'echo x > /data/other');
      expect(write.code).not.toBe(0);
      expect(write.stderr).toContain('Read-only file system');
    } finally {
      for (const name of [first, second]) await call(server.url, 'DELETE', `/sandboxes/${name}`);
      await call(server.url, 'DELETE', `/volumes/${volume}`);
    }
  });
});
