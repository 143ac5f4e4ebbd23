import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../../../src/paths.js';
import { moduleOfHandlers } from '../../../../../src/services/durable/objects/index.js';

// The runners are the code that runs inside an object's sandbox; here they run on the test
// host, so that their protocol and the storage API are tested without a container.
const RUNNERS = join(PACKAGE_ROOT, 'src', 'services', 'durable', 'objects', 'runner');
const dir = mkdtempSync(join(tmpdir(), 'sandboxd-runner-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Reply {
  ok: boolean;
  result?: unknown;
  writes?: { put: Record<string, unknown>; delete: string[]; delete_all: boolean };
  alarm?: unknown;
  kind?: string;
  error?: { name: string; message: string };
  methods?: string[];
}

/** Runs the runner once with these requests (one line each); its answers by nonce, and its stderr. */
function run(runtime: 'node' | 'python', module: string, requests: { method: string; args?: unknown; storage?: object; alarm?: object | null }[]) {
  const lines = requests.map((r, i) =>
    JSON.stringify({
      nonce: `n${i}`,
      module,
      method: r.method,
      args: r.args ?? {},
      storage: r.storage ?? {},
      alarm: r.alarm ?? null,
      object: { id: 'id-1', class: 'c', object_id: 'o' },
      now: '2026-01-01T00:00:00.000Z',
      call_id: `call-${i}`,
    }),
  );
  const argv = runtime === 'node' ? ['node', [join(RUNNERS, 'runner.mjs')]] : ['python3', ['-u', join(RUNNERS, 'runner.py')]];
  const child = spawnSync(argv[0] as string, argv[1] as string[], { input: `${lines.join('\n')}\n`, encoding: 'utf8', timeout: 20_000 });
  const stdout = child.stdout.split('\n').filter(Boolean);
  // Every stdout line is an answer: nothing a method prints may reach it.
  for (const line of stdout) expect(line).toMatch(/^n\d+ \{/);
  const replies = stdout.map((line) => JSON.parse(line.slice(line.indexOf(' ') + 1)) as Reply);
  expect(replies).toHaveLength(requests.length);
  return { replies, stderr: child.stderr };
}

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('the node runner', () => {
  const module = write(
    'storage.mjs',
    `import { execSync } from 'node:child_process';
export function ops(args, ctx) {
  ctx.storage.put({ b: 2, a: 1, 'p:1': 'x', 'p:2': 'y' });
  ctx.storage.delete('gone');
  console.log('to stderr');
  process.stdout.write('also to stderr\\n');
  return {
    a: ctx.storage.get('a'),
    missing: ctx.storage.get('missing', 'dflt'),
    many: ctx.storage.get(['a', 'b', 'zz']),
    prefixed: ctx.storage.list({ prefix: 'p:' }),
    range: Object.keys(ctx.storage.list({ start: 'a', end: 'p', reverse: true, limit: 1 })),
    env: process.env.SANDBOXD_OBJECT_ID + '/' + process.env.SANDBOXD_CALL_ID,
    now: ctx.now.toISOString(),
  };
}
export function wipe(args, ctx) { ctx.storage.deleteAll(); ctx.storage.put('fresh', true); }
export function copyIsolated(args, ctx) { const v = ctx.storage.get('obj'); v.changed = true; return ctx.storage.get('obj'); }
export function alarms(args, ctx) { const before = ctx.getAlarm(); ctx.setAlarm({ in_seconds: 90 }, 'tick', { n: 1 }); return { before, after: ctx.getAlarm() }; }
export function unalarm(args, ctx) { ctx.deleteAlarm(); }
export function nothing() {}
export function bigint() { return 10n; }
export async function later(args) { await new Promise((r) => setTimeout(r, 5)); return args.x * 2; }
export function _private() { return 'no'; }
`,
  );

  it('gives methods the storage API and returns their writes; prints nothing but answers on stdout', () => {
    const { replies, stderr } = run('node', module, [{ method: 'ops', storage: { gone: 1, zz: 0 } }]);
    const [reply] = replies;
    expect(reply!.ok).toBe(true);
    expect(reply!.result).toEqual({
      a: 1,
      missing: 'dflt',
      many: { a: 1, b: 2, zz: 0 },
      prefixed: { 'p:1': 'x', 'p:2': 'y' },
      range: ['b'],
      env: 'id-1/call-0',
      now: '2026-01-01T00:00:00.000Z',
    });
    expect(reply!.writes).toEqual({ put: { b: 2, a: 1, 'p:1': 'x', 'p:2': 'y' }, delete: ['gone'], delete_all: false });
    expect(stderr).toContain('to stderr');
    expect(stderr).toContain('also to stderr');
  });

  it('serves call after call in one process, with deleteAll, copies, alarms, async methods and failures', () => {
    const { replies } = run('node', module, [
      { method: 'wipe', storage: { old: 1 } },
      { method: 'copyIsolated', storage: { obj: { a: 1 } } },
      { method: 'alarms', alarm: { fire_at: '2026-01-02T00:00:00.000Z', method: 'alarm', args: {} } },
      { method: 'unalarm' },
      { method: 'nothing' },
      { method: 'later', args: { x: 21 } },
      { method: 'bigint' },
      { method: '_private' },
      { method: '__describe' },
    ]);
    expect(replies[0]!.writes).toEqual({ put: { fresh: true }, delete: [], delete_all: true });
    expect(replies[1]!.result).toEqual({ a: 1 });
    expect(replies[2]!.result).toEqual({
      before: { fire_at: '2026-01-02T00:00:00.000Z', method: 'alarm', args: {} },
      after: { fire_at: '2026-01-01T00:01:30.000Z', method: 'tick', args: { n: 1 } },
    });
    expect(replies[2]!.alarm).toEqual({ at: '2026-01-01T00:01:30.000Z', method: 'tick', args: { n: 1 } });
    expect(replies[3]!.alarm).toBeNull();
    expect(replies[4]).toMatchObject({ ok: true, result: null });
    expect(replies[4]!.alarm).toBeUndefined();
    expect(replies[5]!.result).toBe(42);
    expect(replies[6]).toMatchObject({ ok: false, kind: 'threw', error: { name: 'TypeError' } });
    expect(replies[7]).toMatchObject({ ok: false, kind: 'method_not_found' });
    expect(replies[8]!.result).toEqual(['alarms', 'bigint', 'copyIsolated', 'later', 'nothing', 'ops', 'unalarm', 'wipe']);
  });

  it('runs a default-exported class (Cloudflare style), constructed per call', () => {
    const klass = write(
      'klass.mjs',
      `export default class Counter {
  constructor(ctx) { this.ctx = ctx; }
  increment(args) { const n = this.ctx.storage.get('n', 0) + 1; this.ctx.storage.put('n', n); return n; }
  _hidden() {}
}`,
    );
    const { replies } = run('node', klass, [{ method: 'increment', storage: { n: 4 } }, { method: '__describe' }]);
    expect(replies[0]!.result).toBe(5);
    expect(replies[1]!.result).toEqual(['increment']);
  });

  it('runs the handlers form on a copy of the whole state', () => {
    const handlers = write(
      'handlers.mjs',
      moduleOfHandlers({ increment: '(input, state) => { state.count = (state.count || 0) + input.by; delete state.old; return state.count; }' }),
    );
    const { replies } = run('node', handlers, [{ method: 'increment', args: { by: 3 }, storage: { count: 1, old: true, keep: 'k' } }]);
    expect(replies[0]!.result).toBe(4);
    expect(replies[0]!.writes).toEqual({ put: { count: 4 }, delete: ['old'], delete_all: false });
  });
});

describe('the python runner', () => {
  const module = write(
    'storage.py',
    `import os, subprocess
def ops(args, ctx):
    ctx.storage.put({'b': 2, 'a': 1, 'p:1': 'x'})
    ctx.storage.delete('gone')
    print('to stderr')
    subprocess.run(['echo', 'child output'])
    return {'a': ctx.storage.get('a'), 'missing': ctx.storage.get('missing', 'dflt'), 'prefixed': ctx.storage.list(prefix='p:'),
            'env': os.environ['SANDBOXD_OBJECT_ID'], 'now': ctx.now.isoformat()}
def alarms(args, ctx):
    ctx.set_alarm({'in_seconds': 90}, 'tick')
    return ctx.get_alarm()
def wipe(args, ctx):
    ctx.storage.delete_all()
async def later(args, ctx):
    return args['x'] * 2
def boom(args, ctx):
    raise ValueError('bad value')
def _private(args, ctx):
    return 1
`,
  );

  it('gives methods the storage API, keeps stdout for answers even from child processes', () => {
    const { replies, stderr } = run('python', module, [
      { method: 'ops', storage: { gone: 1 } },
      { method: 'alarms' },
      { method: 'wipe' },
      { method: 'later', args: { x: 4 } },
      { method: 'boom' },
      { method: 'nope' },
      { method: '__describe' },
    ]);
    expect(replies[0]!.result).toEqual({ a: 1, missing: 'dflt', prefixed: { 'p:1': 'x' }, env: 'id-1', now: '2026-01-01T00:00:00+00:00' });
    expect(replies[0]!.writes).toEqual({ put: { b: 2, a: 1, 'p:1': 'x' }, delete: ['gone'], delete_all: false });
    expect(replies[1]!.alarm).toEqual({ at: '2026-01-01T00:01:30.000Z', method: 'tick', args: {} });
    expect(replies[2]!.writes!.delete_all).toBe(true);
    expect(replies[3]!.result).toBe(8);
    expect(replies[4]).toMatchObject({ ok: false, kind: 'threw', error: { name: 'ValueError', message: 'bad value' } });
    expect(replies[5]).toMatchObject({ ok: false, kind: 'method_not_found' });
    expect(replies[6]!.result).toEqual(['alarms', 'boom', 'later', 'ops', 'wipe']);
    expect(stderr).toContain('to stderr');
    expect(stderr).toContain('child output');
  });
});
