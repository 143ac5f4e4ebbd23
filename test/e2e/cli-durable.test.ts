import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSession, jsonOf, tableRows } from '../helpers/cli-session.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'cli-durable-test-key';

/**
 * Schedules, stores and orchestrations through the CLI, against a spawned server on the fake
 * backend (its exec prints the argv it was given, exit 0): tables for people, the API's data
 * with --json, exit 1 for what the API refuses and 2 for what cannot be sent.
 */
describe('sandboxd schedule, store and orchestration (fake backend)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-durable-'));
  let server: ServerProcess;
  const { cli, cliWithInput } = cliSession(() => ({ SERVICE_DATA_DIR: dataDir, SERVICE_API_KEY: KEY, SERVICE_URL: '' }));

  beforeAll(async () => {
    server = await startServer(dataDir, ['--backend', 'fake', '--api-key', KEY]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates schedules of a sandbox command and of a fresh run, triggers one and shows its runs', async () => {
    await cli('sandbox', 'create', 'cron-box');
    const created = await cli('schedule', 'create', 'ping', '--cron', '*/5 * * * *', '--target-sandbox', 'cron-box', '--', 'echo', 'hi', '--json');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^name: +ping$/m);
    expect(created.stdout).toMatch(/^method: +exec$/m);
    expect(created.stdout).toMatch(/^args: +\{"command":\["echo","hi","--json"\]\}$/m);
    expect(created.stdout).toMatch(/^next: +\S+Z \(in \d+[smhd]\)$/m);
    const once = jsonOf(await cli('schedules', 'create', 'later', '--fire-at', '2030-01-01T00:00:00Z', '--paused', '--json', '--', 'date'));
    expect(once).toMatchObject({ name: 'later', method: 'run', fire_at: '2030-01-01T00:00:00.000Z', status: 'paused', args: { command: ['date'] } });

    const run = await cli('schedule', 'trigger', 'ping');
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/^status: +succeeded$/m);
    expect(run.stdout).toMatch(/^result: +\{"exit_code":0,"stdout":"echo hi --json\\n"/m);

    const [header, ...rows] = tableRows((await cli('schedule', 'ls')).stdout);
    expect(header).toEqual(['NAME', 'STATUS', 'WHEN', 'TARGET', 'NEXT', 'LAST RUN', 'FIRED', 'TRIGGERED']);
    expect(rows).toEqual([
      ['later', 'paused', 'at 2030-01-01T00:00:00.000Z', 'run', '-', '-', '0', '0'],
      ['ping', 'active', '*/5 * * * *', 'exec in cron-box', expect.stringMatching(/^in \d+[sm]$/), 'succeeded', '0', '1'],
    ]);
    const runs = tableRows((await cli('schedule', 'runs', 'ping')).stdout);
    expect(runs[0]).toEqual(['STARTED', 'STATUS', 'DURATION', 'ERROR']);
    expect(runs.slice(1)).toEqual([[expect.stringMatching(/Z$/), 'succeeded', expect.stringMatching(/^\d+ms$/)]]);
    expect(jsonOf(await cli('schedule', 'runs', 'ping', '--status', 'failed', '--json'))).toEqual([]);

    expect(jsonOf(await cli('schedule', 'pause', 'ping', '--json'))).toMatchObject({ status: 'paused', next_fire_at: null });
    expect(jsonOf(await cli('schedule', 'resume', 'ping', '--json'))).toMatchObject({ status: 'active', next_fire_at: expect.any(String) });
    expect((await cli('schedule', 'get', 'ping')).stdout).toMatch(/^triggered: +1$/m);

    // A run that fails (its sandbox is gone) is printed, and the command exits 1.
    await cli('sandbox', 'rm', 'cron-box');
    const failed = await cli('schedule', 'trigger', 'ping');
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^status: +failed$/m);
    expect(failed.stdout).toMatch(/^error: .*cron-box/m);

    expect(await cli('schedule', 'rm', 'ping', 'later')).toEqual({ code: 0, stdout: 'ping\nlater\n', stderr: '' });
    expect(await cli('schedule', 'get', 'ping')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('ping') });
  });

  it('refuses malformed schedules: exit 2 before the server, exit 1 for what the server refuses', async () => {
    const usage: [string[], string][] = [
      [['schedule', 'create', 'x', '--', 'echo'], 'say when with --cron EXPR or --fire-at TIME'],
      [['schedule', 'create', 'x', '--cron', '@daily', '--target-class', 'Counter'], '--target-class Counter: say which method to call with --method'],
      [['schedule', 'create', 'x', '--cron', '@daily', '--target-orchestration', 'o', '--', 'echo'], 'a command (after --) is for exec and run targets, not method start'],
      [['schedule', 'create', 'x', '--cron', '@daily', '--args', '[1]'], '--args: must be a JSON object'],
      [['schedule', 'create', 'x', '--cron', '@daily', '--args', '{oops'], '--args: not JSON'],
      [['schedule', 'create', 'x', '--cron', '@daily', '--overlap', 'never'], "--overlap 'never': expected one of skip, allow"],
      [['schedule', 'ls', '--status', 'sleeping'], "--status 'sleeping': expected one of active, paused, completed, failed"],
      [['schedule', 'runs', 'x', '--limit', 'many'], "--limit 'many': expected a whole number"],
    ];
    for (const [args, message] of usage) {
      const result = await cli(...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr, args.join(' ')).toContain(message);
    }
    const badCron = await cli('schedule', 'create', 'x', '--cron', 'every day', '--', 'echo');
    expect(badCron).toMatchObject({ code: 1, stdout: '' });
    expect(badCron.stderr).toMatch(/^error: cron: /);
  });

  it('creates a sqlite store, writes and reads it as a table, and runs kv commands', async () => {
    const created = await cli('store', 'create', 'notes', '--kind', 'sqlite');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^kind: +sqlite$/m);
    expect(await cli('store', 'execute', 'notes', 'CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, n REAL)')).toEqual({ code: 0, stdout: 'rows affected: 0\n', stderr: '' });
    expect(await cli('store', 'execute', 'notes', 'INSERT INTO t (body, n) VALUES (?, ?)', '--param', 'hello', '--param', '1.5')).toEqual({
      code: 0,
      stdout: 'rows affected: 1, last insert id: 1\n',
      stderr: '',
    });
    const batch = await cli('store', 'exec', 'notes', "INSERT INTO t (body) VALUES ('a')", "INSERT INTO t (body) VALUES ('b')");
    expect(tableRows(batch.stdout)).toEqual([
      ['STATEMENT', 'ROWS AFFECTED', 'LAST INSERT ID'],
      ['1', '1', '2'],
      ['2', '1', '3'],
    ]);
    const sql = join(dataDir, 'select.sql');
    writeFileSync(sql, 'SELECT id, body, n FROM t ORDER BY id');
    const query = await cli('store', 'query', 'notes', `@${sql}`);
    expect(query).toMatchObject({ code: 0, stderr: '(3 rows)\n' });
    expect(tableRows(query.stdout)).toEqual([
      ['id', 'body', 'n'],
      ['1', 'hello', '1.5'],
      ['2', 'a', 'NULL'],
      ['3', 'b', 'NULL'],
    ]);
    const fromStdin = jsonOf(await cliWithInput('SELECT body FROM t WHERE id = ?', 'store', 'query', 'notes', '-', '--params', '[2]', '--json'));
    expect(fromStdin).toMatchObject({ columns: ['body'], rows: [['a']], row_count: 1, truncated: false });

    await cli('store', 'create', 'cache', '--kind', 'kv');
    expect(await cli('store', 'command', 'cache', 'SET', 'greeting', 'hello')).toEqual({ code: 0, stdout: 'OK\n', stderr: '' });
    expect(await cli('store', 'command', 'cache', 'GET', 'greeting')).toEqual({ code: 0, stdout: 'hello\n', stderr: '' });
    expect(jsonOf(await cli('stores', 'cmd', 'cache', 'INCR', 'visits', '--json'))).toBe(1);

    const [header, ...rows] = tableRows((await cli('store', 'ls')).stdout);
    expect(header).toEqual(['NAME', 'KIND', 'SANDBOX', 'SIZE', 'STATE', 'AGE']);
    expect(rows.map((row) => row.slice(0, 3))).toEqual([
      ['cache', 'kv', '-'],
      ['notes', 'sqlite', '-'],
    ]);
    expect(jsonOf(await cli('store', 'update', 'notes', '--set', 'read_only=true', '--json'))).toMatchObject({ name: 'notes', config: { read_only: true } });
    const readOnly = await cli('store', 'execute', 'notes', 'DELETE FROM t');
    expect(readOnly).toMatchObject({ code: 1, stdout: '' });

    // A write sent as a query: the API's refusal, its next step as a command.
    const write = await cli('store', 'query', 'notes', 'DELETE FROM t');
    expect(write).toMatchObject({ code: 1, stdout: '' });
    expect(write.stderr).toContain('use `sandboxd store execute notes SQL`');
    expect(await cli('store', 'rm', 'notes', 'cache')).toEqual({ code: 0, stdout: 'notes\ncache\n', stderr: '' });
  });

  it('refuses malformed store requests with exit 2, naming the flag', async () => {
    const usage: [string[], string][] = [
      [['store', 'create', 'x'], "required option '--kind <kind>' not specified"],
      [['store', 'create', 'x', '--kind', 'mongo'], "--kind 'mongo': expected one of sqlite, kv, queue, postgres, mysql, redis"],
      [['store', 'create', 'x', '--kind', 'postgres', '--config', 'host=db'], '--config: not JSON'],
      [['store', 'create', 'x', '--kind', 'postgres', '--set', 'host'], "--set 'host': expected KEY=VALUE"],
      [['store', 'query', 'x', 'SELECT ?', '--param', '1', '--params', '[1]'], 'give --param or --params, not both'],
      [['store', 'execute', 'x', 'SELECT 1', 'SELECT 2', '--param', '1'], '--param and --params bind one statement'],
      [['store', 'update', 'x'], 'store update: give --config JSON or --set KEY=VALUE'],
      [['store', 'command', 'x'], "missing required argument 'words'"],
    ];
    for (const [args, message] of usage) {
      const result = await cli(...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr, args.join(' ')).toContain(message);
    }
    expect(await cli('store', 'query', 'nowhere', 'SELECT 1')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('nowhere') });
  });

  it('saves a definition, starts an instance, raises its event, shows its status and terminates another', async () => {
    const file = join(dataDir, 'hello.json');
    writeFileSync(
      file,
      JSON.stringify({
        name: 'hello',
        description: 'greets, then waits',
        steps: [
          { id: 'greet', type: 'activity', run: { command: ['echo', 'hi ${input.who}'] } },
          { id: 'ok', type: 'wait_for_event', event: 'approved' },
        ],
        output: '${steps.ok.output}',
      }),
    );
    const saved = await cli('orchestration', 'definition', 'create', file);
    expect(saved).toMatchObject({ code: 0, stderr: '' });
    expect(saved.stdout).toMatch(/^steps: +greet \(activity\), ok \(wait_for_event\)$/m);
    expect(tableRows((await cli('orchestration', 'def', 'ls')).stdout)).toEqual([
      ['NAME', 'VERSION', 'STEPS', 'UPDATED', 'DESCRIPTION'],
      ['hello', '1', 'greet,ok', expect.stringMatching(/ ago$/), 'greets, then waits'],
    ]);

    const started = jsonOf(await cli('orchestration', 'start', 'hello', '--id', 'hello-1', '--input', '{"who": "there"}', '--json'));
    expect(started).toMatchObject({ id: 'hello-1', name: 'hello', input: { who: 'there' } });
    // The activity runs on its own: wait until the instance waits for its event.
    let waiting = jsonOf(await cli('orchestration', 'status', 'hello-1', '--json'));
    while (waiting.status !== 'waiting') waiting = jsonOf(await cli('orchestration', 'status', 'hello-1', '--json'));
    const status = await cli('orchestration', 'status', 'hello-1');
    expect(status.stdout).toMatch(/^status: +waiting$/m);
    expect(status.stdout).toMatch(/^waiting for: approved$/m);
    expect(tableRows(status.stdout.split('\n\n')[1] ?? '')).toEqual([
      ['STEP', 'TYPE', 'STATUS', 'ATTEMPTS', 'DETAIL'],
      ['greet', 'activity', 'completed', '1', '"echo hi there\\n"'],
      ['ok', 'wait_for_event', 'waiting', '-', 'waits for approved'],
    ]);

    expect(await cli('orchestration', 'raise', 'hello-1', 'approved', '{"ok": true}')).toMatchObject({ code: 0, stdout: expect.stringMatching(/^raised approved on hello-1 /) });
    let done = jsonOf(await cli('orchestration', 'get', 'hello-1', '--json'));
    while (done.status !== 'completed') done = jsonOf(await cli('orchestration', 'get', 'hello-1', '--json'));
    expect(done).toMatchObject({ output: { ok: true }, history: expect.arrayContaining([expect.objectContaining({ type: 'EventRaised' })]) });
    const history = await cli('orchestration', 'status', 'hello-1', '--history');
    expect(history.stdout).toMatch(/^output: +\{"ok":true\}$/m);
    expect(history.stdout).toMatch(/^\d+ +\S+Z +EventConsumed +ok$/m);

    await cli('orchestration', 'start', 'hello', '--id', 'hello-2', '--input', '{"who": "you"}');
    let second = jsonOf(await cli('orchestration', 'status', 'hello-2', '--json'));
    while (second.status !== 'waiting') second = jsonOf(await cli('orchestration', 'status', 'hello-2', '--json'));
    const terminated = await cli('orchestration', 'terminate', 'hello-2', '--reason', 'not needed');
    expect(terminated.stdout).toMatch(/^status: +terminated$/m);
    expect(tableRows((await cli('orchestrations', 'ls', '--status', 'terminated')).stdout)).toEqual([
      ['ID', 'DEFINITION', 'STATUS', 'AGE', 'WAITING FOR'],
      ['hello-2', 'hello', 'terminated', expect.stringMatching(/^\d+[smhd]$/), '-'],
    ]);

    // What the API refuses: exit 1 with its message; what cannot be sent: exit 2.
    expect(await cli('orchestration', 'raise', 'hello-1', 'approved')).toMatchObject({ code: 1, stdout: '' });
    expect(await cli('orchestration', 'start', 'nope')).toMatchObject({ code: 1, stderr: expect.stringContaining("'nope' not found") });
    expect(await cli('orchestration', 'start', 'hello', '--input', '{who')).toMatchObject({ code: 2, stderr: expect.stringContaining('--input: not JSON') });
    expect(await cli('orchestration', 'def', 'create', join(dataDir, 'missing.json'))).toMatchObject({ code: 1, stderr: expect.stringContaining('missing.json: no such file or directory') });
    writeFileSync(file, JSON.stringify({ name: 'broken', steps: [{ id: 'x', type: 'teleport' }] }));
    expect(await cli('orchestration', 'def', 'create', file)).toMatchObject({ code: 1, stderr: expect.stringContaining('steps[0]') });
    expect(await cli('orchestration', 'ls', '--status', 'asleep')).toMatchObject({ code: 2, stderr: expect.stringContaining("--status 'asleep': expected one of pending") });

    expect(await cli('orchestration', 'rm', 'hello-1', 'hello-2')).toEqual({ code: 0, stdout: 'hello-1\nhello-2\n', stderr: '' });
    expect(await cli('orchestration', 'def', 'rm', 'hello')).toEqual({ code: 0, stdout: 'hello\n', stderr: '' });
  });
});
