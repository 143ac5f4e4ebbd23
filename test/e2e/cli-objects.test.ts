import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSession, jsonOf, tableRows } from '../helpers/cli-session.js';
import { fakeHarness, type FakeHarness } from '../helpers/fake-app.js';
import { scriptObjectRunner } from '../helpers/object-runner-double.js';

const NODE_SOURCE = 'export function increment(args, ctx) { /* the double below runs it */ }\nexport function greet() {}\n';

/**
 * Durable objects through the CLI: the built CLI, spawned, against the service on the fake
 * backend listening on a port, whose object runner is the test double (methods written in
 * TypeScript here stand for the module the class file holds), so that calls run without Docker.
 */
describe('sandboxd object (fake backend, object runner double)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-cli-objects-'));
  let h: FakeHarness;
  let url = '';
  const { cli } = cliSession(() => ({ SERVICE_URL: url, SERVICE_DATA_DIR: dir, SERVICE_API_KEY: '' }));
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };

  beforeAll(async () => {
    h = await fakeHarness({ poolSize: 0 });
    scriptObjectRunner(h.backend, {
      counter: {
        increment: (args: { by?: number }, ctx) => {
          const next = (ctx.storage.get('count', 0) as number) + (args.by ?? 1);
          ctx.storage.put('count', next);
          ctx.log(`count is ${next}`);
          return next;
        },
        greet: (args: { who?: string }) => `hello ${args.who ?? 'you'}`,
      },
      pycounter: { increment: () => 1 },
    });
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers classes from files, the runtime from the extension, and lists and shows them', async () => {
    const source = file('counter.mjs', NODE_SOURCE);
    const created = await cli('object', 'class', 'create', 'counter', source, '--timeout', '5000');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^name: +counter$/m);
    expect(created.stdout).toMatch(/^runtime: +node$/m);
    expect(created.stdout).toMatch(/^timeout_ms: +5000$/m);
    expect(created.stdout).toMatch(/^source: +2 lines \(class get --source prints it\)$/m);
    expect(jsonOf(await cli('objects', 'classes', 'create', 'pycounter', file('counter.py', 'def increment(args, ctx):\n    return 1\n'), '--json'))).toMatchObject({
      name: 'pycounter',
      runtime: 'python',
      version: 1,
    });
    // The same source again changes nothing: the version stays.
    expect(jsonOf(await cli('object', 'class', 'create', 'counter', source, '--timeout', '5000', '--json'))).toMatchObject({ version: 1 });

    expect(tableRows((await cli('object', 'class', 'ls')).stdout)).toEqual([
      ['NAME', 'RUNTIME', 'VERSION', 'METHODS', 'OBJECTS', 'UPDATED'],
      ['counter', 'node', '1', '-', '0', expect.stringMatching(/ ago$/)],
      ['pycounter', 'python', '1', '-', '0', expect.stringMatching(/ ago$/)],
    ]);
    expect(await cli('object', 'class', 'get', 'counter', '--source')).toEqual({ code: 0, stdout: NODE_SOURCE, stderr: '' });
  });

  it('calls methods with JSON arguments and prints what they return; --verbose adds what they printed', async () => {
    expect(await cli('object', 'call', 'counter', 'alice', 'increment', '{"by": 2}')).toEqual({ code: 0, stdout: '2\n', stderr: '' });
    expect(await cli('object', 'call', 'counter', 'alice', 'increment', `@${file('args.json', '{"by": 3}')}`)).toEqual({ code: 0, stdout: '5\n', stderr: '' });
    // A string comes out as it is for people, as JSON for scripts.
    expect(await cli('object', 'call', 'counter', 'bob', 'greet', '{"who": "ann"}')).toEqual({ code: 0, stdout: 'hello ann\n', stderr: '' });
    expect(await cli('object', 'call', 'counter', 'bob', 'greet', '--json')).toEqual({ code: 0, stdout: '"hello you"\n', stderr: '' });
    expect(await cli('object', 'call', 'counter', 'alice', 'increment', '--verbose')).toEqual({ code: 0, stdout: '6\n', stderr: 'count is 6\n' });
    expect(jsonOf(await cli('object', 'call', 'counter', 'alice', 'increment', '--verbose', '--json'))).toMatchObject({ result: 7, logs: 'count is 7\n', cold_start: false });

    // The same idempotency key twice runs the method once (and counts one call).
    expect((await cli('object', 'call', 'counter', 'alice', 'increment', '--idempotency-key', 'k-1')).stdout).toBe('8\n');
    expect((await cli('object', 'call', 'counter', 'alice', 'increment', '--idempotency-key', 'k-1')).stdout).toBe('8\n');

    const listed = tableRows((await cli('object', 'ls', '--class', 'counter')).stdout);
    expect(listed[0]).toEqual(['CLASS', 'OBJECT ID', 'STATUS', 'CALLS', 'LAST CALL', 'SANDBOX']);
    expect(listed.slice(1).map((row) => row.slice(0, 4))).toEqual(
      expect.arrayContaining([
        ['counter', 'alice', 'active', '5'],
        ['counter', 'bob', 'active', '2'],
      ]),
    );
    const shown = await cli('object', 'get', 'counter', 'alice');
    expect(shown.stdout).toMatch(/^storage: +\{"count":8\}$/m);
    expect(jsonOf(await cli('object', 'get', 'counter', 'alice', '--json'))).toMatchObject({ class: 'counter', object_id: 'alice', storage: { count: 8 }, call_count: 5 });
    const calls = tableRows((await cli('object', 'calls', 'counter', 'alice', '--limit', '2')).stdout);
    expect(calls).toEqual([
      ['STARTED', 'METHOD', 'SOURCE', 'OUTCOME', 'DURATION', 'ERROR'],
      [expect.stringMatching(/Z$/), 'increment', 'http', 'ok', expect.stringMatching(/^\d+ms$/)],
      [expect.stringMatching(/Z$/), 'increment', 'http', 'ok', expect.stringMatching(/^\d+ms$/)],
    ]);
    expect((await cli('object', 'class', 'get', 'counter')).stdout).toMatch(/^methods: +greet, increment$/m);
  });

  it('says what is wrong: exit 2 for what cannot be sent, exit 1 with the next step for what the API refuses', async () => {
    const usage: [string[], string][] = [
      [['object', 'call', 'counter', 'alice', 'increment', '{by: 2}'], 'args: not JSON'],
      [['object', 'call', 'counter', 'alice', 'increment', '--timeout', 'soon'], "--timeout 'soon': expected a whole number"],
      [['object', 'class', 'create', 'x', file('x.txt', 'text')], "say the class's runtime with --runtime node|python"],
      [['object', 'class', 'create', 'x', file('y.mjs', 'x'), '--runtime', 'ruby'], "--runtime 'ruby': expected one of node, python"],
      [['object', 'ls', '--status', 'sleeping'], "--status 'sleeping': expected one of active, hibernating"],
      [['object', 'call', 'counter', 'alice'], "missing required argument 'method'"],
    ];
    for (const [args, message] of usage) {
      const result = await cli(...args);
      expect(result, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr, args.join(' ')).toContain(message);
    }
    const unknown = await cli('object', 'call', 'ghost', 'a', 'm');
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toContain('register it first with `sandboxd object class create ghost FILE`');
    expect(await cli('object', 'class', 'create', 'x', join(dir, 'missing.mjs'))).toMatchObject({ code: 1, stderr: expect.stringContaining('missing.mjs: no such file or directory') });
    expect(await cli('object', 'class', 'create', 'broken', file('broken.mjs', 'foo(SYNTAX ERROR;'))).toMatchObject({ code: 1, stderr: expect.stringContaining('SyntaxError') });
    const busy = await cli('object', 'class', 'rm', 'counter');
    expect(busy).toMatchObject({ code: 1, stdout: '' });
  });

  it('removes objects by class and id, then their class', async () => {
    expect(await cli('object', 'rm', 'counter', 'alice', 'bob')).toEqual({ code: 0, stdout: 'alice\nbob\n', stderr: '' });
    expect(await cli('object', 'get', 'counter', 'alice')).toMatchObject({ code: 1, stderr: expect.stringContaining('alice') });
    expect(await cli('object', 'class', 'rm', 'counter', 'pycounter')).toEqual({ code: 0, stdout: 'counter\npycounter\n', stderr: '' });
    expect(jsonOf(await cli('object', 'class', 'ls', '--json'))).toEqual([]);
  });
});
