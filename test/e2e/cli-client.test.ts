import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, runCli, startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'cli-client-test-key';
const ESC = '\u001b';

/**
 * The client commands of `sandboxd` against a spawned server on the fake backend: the local
 * server is found through <data-dir>/server.json, the key comes from SERVICE_API_KEY or
 * --api-key. Output is piped, as a script sees it: no escape codes anywhere.
 */
describe('sandboxd client commands (fake backend)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-client-'));
  let server: ServerProcess;
  const env = () => ({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEY: KEY, SERVICE_URL: '' });
  const cli = async (...args: string[]) => {
    const result = await runCli(args, env());
    expect(result.stdout + result.stderr, 'no escape codes when piped').not.toContain(ESC);
    return result;
  };

  beforeAll(async () => {
    server = await startServer(dataDir, ['--backend', 'fake', '--api-key', KEY, '--events']);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates, lists, gets, stops, starts and removes sandboxes; tables for people, JSON for scripts', async () => {
    const created = await cli('sandbox', 'create', 'alpha', '--label', 'team=red', '--label', 'tier=1', '--profile', 'restrictive', '--memory', '256');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^name: +alpha$/m);
    expect(created.stdout).toMatch(/^memory_mb: +256$/m);
    const json = await cli('--json', 'sandbox', 'create', 'beta', '--ttl', '1h');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: 'beta', status: 'running', profile: 'moderate' });

    const table = await cli('sandbox', 'ls');
    expect(table.code).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header!.split(/ {2,}/)).toEqual(['NAME', 'STATUS', 'IMAGE', 'PROFILE', 'AGE', 'LABELS']);
    expect(rows.map((row) => row.split(/ {2,}/))).toEqual(
      expect.arrayContaining([
        ['alpha', 'running', expect.any(String), 'restrictive', expect.stringMatching(/^\d+[smhd]$/), 'team=red,tier=1'],
        ['beta', 'running', expect.any(String), 'moderate', expect.stringMatching(/^\d+[smhd]$/), '-'],
      ]),
    );
    const filtered = JSON.parse((await cli('sandbox', 'list', '--label', 'team=red', '--json')).stdout) as { name: string }[];
    expect(filtered.map((s) => s.name)).toEqual(['alpha']);

    expect(JSON.parse((await cli('sandbox', 'get', 'alpha', '--json')).stdout)).toMatchObject({ name: 'alpha', labels: { team: 'red', tier: '1' } });
    expect(JSON.parse((await cli('sandbox', 'stop', '--json', 'alpha')).stdout)).toMatchObject({ status: 'stopped' });
    expect((await cli('sandbox', 'get', 'alpha')).stdout).toMatch(/^status: +stopped$/m);
    expect(JSON.parse((await cli('sandbox', 'start', 'alpha', '--json')).stdout)).toMatchObject({ status: 'running' });

    const removed = await cli('sandbox', 'rm', 'alpha', 'beta');
    expect(removed).toMatchObject({ code: 0, stdout: 'alpha\nbeta\n', stderr: '' });
    expect(JSON.parse((await cli('sandbox', 'ls', '--json')).stdout)).toEqual([]);
  });

  it("leaves the server's own sandboxes (an object's) out of sandbox ls unless --internal", async () => {
    const call = (method: string, path: string, body?: object) =>
      fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const defined = await call('POST', '/objects/classes', { name: 'counter', runtime: 'node', image: 'sandboxd/base:bookworm', source: 'export const x = 1;' });
    expect(defined.status, await defined.clone().text()).toBe(201);
    // The fake backend runs no runner, so the call fails; the object's sandbox was made first.
    await call('POST', '/objects/counter/alice/call/get');
    const object = (await (await call('GET', '/objects/counter/alice')).json()) as { data: { sandbox: string } };
    await cli('sandbox', 'create', 'mine');
    const names = async (...flags: string[]) => (JSON.parse((await cli('sandbox', 'ls', '--json', ...flags)).stdout) as { name: string }[]).map((s) => s.name).sort();
    expect(await names()).toEqual(['mine']);
    expect(await names('--internal')).toEqual([object.data.sandbox, 'mine'].sort());
    await call('DELETE', '/objects/counter/alice');
    await cli('sandbox', 'rm', 'mine');
  });

  it('takes the global flags anywhere before --, as kubectl does', async () => {
    await cli('sandbox', 'create', 'flags');
    const positions = [
      ['--json', 'sandbox', 'ls'],
      ['sandbox', '--json', 'ls'],
      ['sandbox', 'ls', '--json'],
      ['--server', server.url, 'sandbox', 'ls', '--json'],
      ['sandbox', 'ls', `--server=${server.url}`, '--api-key', KEY, '--json'],
    ];
    for (const args of positions) {
      const result = await cli(...args);
      expect(result.code, args.join(' ')).toBe(0);
      expect((JSON.parse(result.stdout) as { name: string }[]).map((s) => s.name), args.join(' ')).toContain('flags');
    }
    // After --, a flag belongs to the command in the sandbox (the fake backend prints its argv).
    const exec = await cli('exec', 'flags', '--json', '--', 'echo', '--json');
    expect(JSON.parse(exec.stdout)).toMatchObject({ exit_code: 0, stdout: 'echo --json\n' });
    // run goes through /run/stream (the fake backend prints the argv it was given).
    expect(await cli('run', '--json', '--', 'echo', 'fresh')).toMatchObject({ code: 0, stderr: '' });
    expect(await cli('run', '--', 'echo', 'fresh')).toEqual({ code: 0, stdout: 'echo fresh\n', stderr: '' });
    await cli('sandbox', 'rm', 'flags');
  });

  it("prints the API's message and its next step as a sandboxd command, exit 1, nothing on stdout", async () => {
    const missing = await cli('sandbox', 'get', 'nope');
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toMatch(/^error: .*nope.*\n$/);

    await cli('sandbox', 'create', 'sleepy');
    await cli('sandbox', 'stop', 'sleepy');
    for (const args of [['exec', 'sleepy', '--', 'true'], ['exec', '--json', 'sleepy', '--', 'true']]) {
      const stopped = await cli(...args);
      expect(stopped).toMatchObject({ code: 1, stdout: '' });
      expect(stopped.stderr).toContain('start it with `sandboxd sandbox start sleepy`');
    }
    await cli('sandbox', 'rm', 'sleepy');

    const refused = await runCli(['sandbox', 'ls', '--api-key', 'wrong'], { ...env(), SERVICE_API_KEY: '' });
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toContain("give sandboxd the server's key with --api-key or SERVICE_API_KEY");

    const unreachable = await cli('sandbox', 'ls', '--server', 'http://127.0.0.1:1');
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('cannot reach the sandboxd server at http://127.0.0.1:1');

    // A missing sandbox answers before the stream opens.
    const execMissing = await cli('exec', 'nope', '--', 'true');
    expect(execMissing).toMatchObject({ code: 1, stdout: '' });
    expect(execMissing.stderr).toMatch(/^error: .*nope.*\n$/);

    const rmSome = await cli('sandbox', 'rm', 'nope-1');
    expect(rmSome.code).toBe(1);
  });

  it('exits 2 on usage errors, naming what is wrong', async () => {
    const cases: [string[], RegExp][] = [
      [['sandbox', 'lsx'], /unknown command 'lsx'/],
      [['sandbox', 'get'], /missing required argument 'name'/],
      [['sandbox', 'create', 'x', '--label', 'novalue'], /--label 'novalue': expected KEY=VALUE/],
      [['sandbox', 'create', 'x', '--vcpus', 'two'], /--vcpus 'two': expected a whole number/],
      [['sandbox', 'ls', '--server'], /--server needs a value/],
      [['sandbox', 'ls', '--json=yes'], /--json takes no value/],
      [['exec', 'x'], /missing required argument 'command'/],
      [['cp', 'a', 'b'], /cp needs a sandbox path, NAME:\/path/],
      [['cp', 'a:/x', 'b:/y'], /one of SRC and DST must be local/],
      [['cp', './x', 'box:relative'], /must be absolute/],
      [['snapshot', 'take', 'only-one'], /missing required argument 'name'/],
      [['completion', 'fish'], /unknown shell 'fish'/],
      [['sandbox', 'ls', '--bogus'], /unknown option '--bogus'/],
      [['sandbox', 'ls', '--status', 'bogus'], /--status 'bogus': expected one of running, stopped, archiving, archived/],
      [['frob'], /unknown command 'frob'\n\(the closest command is 'run'; see --help for all of them\)/],
      [['sandbox', 'ls', '--url', 'http://x'], /unknown option '--url'\n\(did you mean --server\?\)/],
    ];
    for (const [args, message] of cases) {
      const result = await cli(...args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(message);
    }
    // A local file that is not there is a failure of the copy, not of how sandboxd was called.
    expect(await cli('cp', join(dataDir, 'missing.txt'), 'box:/workspace/x')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('missing.txt: no such file or directory') });
    const badSetting = await runCli(['sandbox', 'ls'], { ...env(), SERVICE_PORT: 'abc' });
    expect(badSetting).toMatchObject({ code: 2, stdout: '' });
    expect(badSetting.stderr).toContain('SERVICE_PORT');
    expect((await cli('--help')).code).toBe(0);
    expect((await cli('sandbox', '--help')).stdout).toContain('create');
  });

  it('shows the audit log and takes, lists, restores and removes snapshots', async () => {
    await cli('sandbox', 'create', 'snap-src');
    await cli('exec', 'snap-src', '--', 'echo', 'hi');
    const logs = await cli('logs', 'snap-src');
    expect(logs.code).toBe(0);
    expect(logs.stdout.split('\n')[0]).toMatch(/^\S+Z {2}sandbox_created +image=/);
    expect(logs.stdout).toContain('command_executed');
    const entries = JSON.parse((await cli('logs', 'snap-src', '--json')).stdout) as { event: string }[];
    expect(entries.map((e) => e.event)).toEqual(['sandbox_created', 'command_executed']);

    expect((await cli('snapshot', 'take', 'snap-src', 'snap-1')).stdout).toMatch(/^sandbox: +snap-src$/m);
    const listed = await cli('snapshot', 'ls');
    expect(listed.stdout.split('\n')[0]!.split(/ {2,}/)).toEqual(['NAME', 'SANDBOX', 'IMAGE', 'PROFILE', 'AGE']);
    expect(listed.stdout).toMatch(/^snap-1 +snap-src /m);
    expect(JSON.parse((await cli('--json', 'snapshot', 'get', 'snap-1')).stdout)).toMatchObject({ name: 'snap-1', sandbox: 'snap-src' });
    // A restore prints the new sandbox as create does: its fields, or the API's record with --json.
    const restored = await cli('snapshot', 'restore', 'snap-1', '--as', 'snap-copy');
    expect(restored).toMatchObject({ code: 0, stderr: '' });
    expect(restored.stdout).toMatch(/^name: +snap-copy$/m);
    expect(restored.stdout).toMatch(/^status: +running$/m);
    expect(restored.stdout).toMatch(/^restored_from: +snap-1$/m);
    expect(JSON.parse((await cli('snapshot', 'restore', 'snap-1', '--as', 'snap-copy2', '--json')).stdout)).toMatchObject({ name: 'snap-copy2', status: 'running', restored_from: 'snap-1' });
    expect(JSON.parse((await cli('sandbox', 'get', 'snap-copy', '--json')).stdout)).toMatchObject({ restored_from: 'snap-1' });
    expect(await cli('snapshot', 'rm', 'snap-1')).toMatchObject({ code: 0, stdout: 'snap-1\n' });
    expect((await cli('snapshot', 'restore', 'snap-1')).code).toBe(1);
    await cli('sandbox', 'rm', 'snap-src', 'snap-copy', 'snap-copy2');
  });

  it('follows the live event stream, filtered by sandbox, as NDJSON with --json', async () => {
    const child = spawn(process.execPath, [CLI, 'events', '--sandbox', 'watched', '--json'], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    const firstLine = new Promise<string>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('\n')) resolve(stdout.split('\n')[0]!);
      });
    });
    // The stream opens at some point after the spawn: sandboxes come and go until it shows one.
    let seen: string | undefined;
    void firstLine.then((line) => (seen = line));
    while (seen === undefined) {
      await cli('sandbox', 'create', 'other');
      await cli('sandbox', 'create', 'watched');
      await cli('sandbox', 'rm', 'other', 'watched');
    }
    child.kill('SIGINT');
    await new Promise((resolve) => child.once('exit', resolve));
    expect(JSON.parse(seen)).toMatchObject({ type: expect.stringMatching(/^sandbox\./), sandbox: 'watched' });
    expect(stdout).not.toContain('"other"');
    expect(child.exitCode).toBe(0);
  });

  it('completes commands, flags and sandbox names for bash and zsh', async () => {
    await cli('sandbox', 'create', 'complete-me');
    expect((await cli('completion', 'bash')).stdout).toContain('complete -o default -F _sandboxd sandboxd');
    expect((await cli('completion', 'zsh')).stdout).toContain('compdef _sandboxd sandboxd');
    const complete = async (...words: string[]) => (await cli('__complete', ...words)).stdout.split('\n').filter(Boolean);
    expect(await complete('sn')).toEqual(['snapshot']);
    expect(await complete('sandbox', '')).toEqual(['create', 'list', 'get', 'rm', 'start', 'stop', 'recover']);
    expect(await complete('exec', '--w')).toEqual(['--workdir']);
    expect(await complete('sandbox', 'ls', '--js')).toEqual(['--json']);
    expect(await complete('sandbox', 'get', 'complete')).toEqual(['complete-me']);
    expect(await complete('exec', 'c')).toEqual(['complete-me']);
    expect(await complete('cp', './x', 'comp')).toEqual(['complete-me:']);
    // Out of reach: no names, no error (the shell falls back to files).
    expect(await runCli(['__complete', '--server', 'http://127.0.0.1:1', 'sandbox', 'get', ''], env())).toMatchObject({ code: 0, stdout: '' });
    await cli('sandbox', 'rm', 'complete-me');
  });

  it("the completion scripts complete in real bash and zsh", async () => {
    await cli('sandbox', 'create', 'shell-done');
    // `sandboxd` on PATH, as the scripts call it, pointed at this test's server by env().
    const bin = mkdtempSync(join(tmpdir(), 'sandboxd-cli-bin-'));
    writeFileSync(join(bin, 'sandboxd'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`, { mode: 0o755 });
    const shell = (program: string, script: string) =>
      new Promise<string>((resolveRun, reject) => {
        execFile(program, ['-c', script], { env: { ...process.env, ...env(), PATH: `${bin}:${process.env.PATH}` } }, (err, stdout, stderr) =>
          err ? reject(new Error(`${program}: ${err.message} ${stderr}`)) : resolveRun(stdout),
        );
      });
    // bash: the function the script registers fills COMPREPLY for the words being typed.
    const bash = (words: string) =>
      shell('bash', `source <(sandboxd completion bash); COMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _sandboxd; printf '%s\\n' "\${COMPREPLY[@]}"`);
    expect((await bash('sandboxd sandbox get shell')).trim()).toBe('shell-done');
    expect((await bash("sandboxd exec --w")).trim()).toBe('--workdir');
    // zsh: the script loads under compinit and registers _sandboxd; compadd is the completion
    // system's builtin, stood in for by a function that prints what it was given.
    const zsh = (words: string) =>
      shell(
        'zsh',
        `autoload -U compinit && compinit -u -D; source <(sandboxd completion zsh); [[ $_comps[sandboxd] == _sandboxd ]] || exit 7; ` +
          `compadd() { print -r -- "compadd $*" }; _files() { print -r -- files }; words=(${words}); CURRENT=\${#words}; _sandboxd`,
      );
    expect((await zsh('sandboxd sandbox get shell')).trim()).toBe('compadd -- shell-done');
    expect((await zsh("sandboxd cp ./x shell")).trim()).toBe("compadd -S  -- shell-done:");
    expect((await zsh("sandboxd sn")).trim()).toBe('compadd -- snapshot');
    expect((await zsh("sandboxd cp ./x /tmp/nothing-")).trim()).toBe('files');
    rmSync(bin, { recursive: true, force: true });
    await cli('sandbox', 'rm', 'shell-done');
  });
});
