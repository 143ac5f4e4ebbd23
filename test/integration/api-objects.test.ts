import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { docker } from '../helpers/docker.js';

let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any }>;

const NODE_COUNTER = `
export function increment(args, ctx) {
  const n = ctx.storage.get('count', 0) + (args.by ?? 1);
  ctx.storage.put('count', n);
  console.log('count is', n);
  return n;
}
export function get(args, ctx) { return ctx.storage.get('count', 0); }
export function putThenThrow(args, ctx) { ctx.storage.put('count', -1); ctx.storage.put('junk', 'x'); throw new RangeError('no way'); }
export function whoami() { return { uid: process.getuid(), cwd: process.cwd(), object: process.env.SANDBOXD_OBJECT_CLASS }; }
export function spin() { for (;;) {} }
export function later(args, ctx) { ctx.setAlarm({ in_seconds: 1 }, 'rang', { n: 7 }); return 'set'; }
export function rang(args, ctx) { ctx.storage.put('rang', args.n); }
export function hog() { const kept = []; for (;;) kept.push(Buffer.alloc(8 * 1024 * 1024, 1)); }
`;

const PYTHON_COUNTER = `
import os
def increment(args, ctx):
    n = ctx.storage.get('count', 0) + args.get('by', 1)
    ctx.storage.put('count', n)
    print('count is', n)
    return n
def whoami(args, ctx):
    return {'uid': os.getuid()}
`;

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
  api = (method, path, body, headers) => call(rt.url, method, path, body, headers);
});

afterAll(async () => {
  await rt?.dispose();
});

async function defineClass(body: object): Promise<string> {
  const name = `c${uniqueName('o').replaceAll('-', '')}`;
  const res = await api('POST', '/objects/classes', { name, ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return name;
}

async function removeObjects(className: string): Promise<void> {
  for (const object of (await api('GET', `/objects?class=${className}`)).body.data) await api('DELETE', `/objects/${object.id}`);
  await api('DELETE', `/objects/classes/${className}`);
}

describe('durable objects on Docker', () => {
  it('runs node methods inside the object sandbox as its user, with no lost update over 50 concurrent calls', async () => {
    const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER });
    const results = await Promise.all(Array.from({ length: 50 }, () => api('POST', `/objects/${klass}/alice/call/increment`, {})));
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(results.map((r) => r.body.data)).size).toBe(50);
    expect((await api('POST', `/objects/${klass}/alice/call/get`)).body.data).toBe(50);
    const who = (await api('POST', `/objects/${klass}/alice/call/whoami`)).body.data;
    expect(who).toEqual({ uid: 1000, cwd: `/workspace/.sandboxd/objects/${klass}`, object: klass });
    const object = (await api('GET', `/objects/${klass}/alice`)).body.data;
    const sandbox = (await api('GET', `/sandboxes/${object.sandbox}`)).body.data;
    expect(sandbox).toMatchObject({ status: 'running', image: 'sandboxd/node:bookworm' });
    // Storage lives on the host: nothing of it is in the sandbox.
    const grep = await api('POST', `/sandboxes/${object.sandbox}/exec`, { command: ['sh', '-c', 'grep -rl "count" /workspace/.sandboxd | grep -v "index.mjs\\|runner" || true'] });
    expect(grep.body.data.stdout).toBe('');
    await removeObjects(klass);
  });

  it('leaves storage byte-identical when a method puts and then throws, and applies an Idempotency-Key once', async () => {
    const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER });
    await api('POST', `/objects/${klass}/bob/call/increment`, { by: 5 });
    const before = JSON.stringify((await api('GET', `/objects/${klass}/bob`)).body.data.storage);
    const thrown = await api('POST', `/objects/${klass}/bob/call/putThenThrow`);
    expect(thrown.status).toBe(422);
    expect(thrown.body.error).toBe(`${klass}/bob.putThenThrow threw RangeError: no way`);
    expect(JSON.stringify((await api('GET', `/objects/${klass}/bob`)).body.data.storage)).toBe(before);
    for (let i = 0; i < 10; i++) await api('POST', `/objects/${klass}/bob/call/increment`, {}, { 'idempotency-key': 'once' });
    expect((await api('POST', `/objects/${klass}/bob/call/get`)).body.data).toBe(6);
    await removeObjects(klass);
  });

  it('kills a method past its timeout and keeps the object usable', async () => {
    const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER, timeout_ms: 1500 });
    await api('POST', `/objects/${klass}/carl/call/increment`);
    const spun = await api('POST', `/objects/${klass}/carl/call/spin`);
    expect(spun.status).toBe(504);
    expect(spun.body.code).toBe('TIMEOUT');
    expect((await api('POST', `/objects/${klass}/carl/call/increment`)).body.data).toBe(2);
    await removeObjects(klass);
  });

  it('keeps storage when the sandbox is deleted, and across hibernation', async () => {
    const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER });
    await api('POST', `/objects/${klass}/dora/call/increment`, { by: 3 });
    const object = (await api('GET', `/objects/${klass}/dora`)).body.data;
    expect((await api('DELETE', `/sandboxes/${object.sandbox}`)).status).toBe(200);
    expect((await api('POST', `/objects/${klass}/dora/call/increment`)).body.data).toBe(4);
    const hibernated = await api('PATCH', `/objects/${object.id}`, { status: 'hibernating' });
    expect(hibernated.body.data.status).toBe('hibernating');
    expect((await api('GET', `/sandboxes/${object.sandbox}`)).body.data.status).toBe('stopped');
    const woken = await api('POST', `/objects/${klass}/dora/call/increment`);
    expect(woken.body.data).toBe(5);
    await removeObjects(klass);
    // Their sandboxes' containers go in the background, once the records are gone.
    await rt.services.departures.settled();
    const left = await docker('ps', '-aq', '--filter', `label=sandboxd.object=${object.id}`);
    expect(left).toBe('');
  });

  it('fires an alarm a method set, within a second or two of its time', async () => {
    const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER });
    expect((await api('POST', `/objects/${klass}/eve/call/later`)).body.data).toBe('set');
    const deadline = Date.now() + 15_000;
    let object;
    do {
      await new Promise((resolve) => setTimeout(resolve, 200));
      object = (await api('GET', `/objects/${klass}/eve`)).body.data;
    } while (object.storage.rang === undefined && Date.now() < deadline);
    expect(object.storage.rang).toBe(7);
    expect(object.alarm).toBeNull();
    await removeObjects(klass);
  });

  it('runs python methods, and restrictive (gVisor) classes', async () => {
    const python = await defineClass({ runtime: 'python', source: PYTHON_COUNTER });
    expect((await api('POST', `/objects/${python}/a/call/increment`, { by: 2 })).body.data).toBe(2);
    expect((await api('POST', `/objects/${python}/a/call/whoami`)).body.data).toEqual({ uid: 1000 });
    const restricted = await defineClass({ runtime: 'node', source: NODE_COUNTER, profile: 'restrictive' });
    expect((await api('POST', `/objects/${restricted}/a/call/increment`, { by: 9 })).body.data).toBe(9);
    expect((await api('POST', `/objects/${restricted}/a/call/get`)).body.data).toBe(9);
    await removeObjects(python);
    await removeObjects(restricted);
  });

  it('reports a method killed for memory as oom_killed, under runc and gVisor alike, and keeps the object usable', async () => {
    for (const profile of ['moderate', 'restrictive']) {
      const klass = await defineClass({ runtime: 'node', source: NODE_COUNTER, profile, memory_mb: 256 });
      await api('POST', `/objects/${klass}/h/call/increment`);
      const hog = await api('POST', `/objects/${klass}/h/call/hog`);
      expect(hog.body.code, profile).toBe('METHOD_FAILED');
      expect(hog.body.details, profile).toMatchObject({ reason: 'exited', exit_code: 137, oom_killed: true });
      expect((await api('POST', `/objects/${klass}/h/call/increment`)).body.data, profile).toBe(2);
      await removeObjects(klass);
    }
  }, 180_000);

    it('refuses a source that does not parse, naming the line, in the class image', async () => {
    const bad = await api('POST', '/objects/classes', { name: uniqueName('bad').replaceAll('-', ''), runtime: 'node', source: 'export function a() {\n  return 1;\n}}\n' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^source: SyntaxError: Unexpected token '}' \(3:2\)$/);
    const py = await api('POST', '/objects/classes', { name: uniqueName('bad').replaceAll('-', ''), runtime: 'python', source: 'def a(args, ctx):\nreturn 1\n' });
    expect(py.status).toBe(400);
    expect(py.body.error).toMatch(/^source: IndentationError: expected an indented block after function definition on line 1 \(2:1\)$/);
  });
});
