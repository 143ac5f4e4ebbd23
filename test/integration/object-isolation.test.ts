import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * Issue 25, item 12, as an attacker: objects bound to one sandbox shared a worker (one per class
 * version, as the sandbox's user), so one object's code could read another's requests (its
 * storage included) and answer for it. Object A's method code tries both, through the shared
 * worker (a hook on the runner's JSON.parse, a forged answer written to fd 1) and through /proc
 * (the stdin and stdout pipes of another object's worker); each must fail.
 */
let rt: DockerRuntime;
let api: (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any }>;
let sandbox: string;

/** A class whose `plant` makes its worker steal and forge the calls of object 'b'. */
const SHARED = `
import { writeSync } from 'node:fs';
let stolen = null;
export function plant() {
  const parse = JSON.parse;
  JSON.parse = (text, ...rest) => {
    const value = parse(text, ...rest);
    if (value && value.object && value.object.object_id === 'b' && value.nonce) {
      stolen = value.storage;
      const forged = { ok: true, result: 'forged', writes: { put: { owned: true }, delete: [], delete_all: false } };
      writeSync(1, value.nonce + ' ' + JSON.stringify(forged) + '\\n');
    }
    return value;
  };
  return 'planted';
}
export function secret(args, ctx) { return ctx.storage.get('secret', null); }
export function leak() { return stolen; }
`;

/** A class whose `probe` opens the pipes of every other object worker it finds under /proc. */
const PROBE = `
import { closeSync, openSync, readdirSync, readFileSync, constants } from 'node:fs';
export function probe() {
  const found = [];
  const opened = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\\d+$/.test(name))) {
    if (Number(pid) === process.pid) continue;
    let cmdline = '';
    try { cmdline = readFileSync('/proc/' + pid + '/cmdline', 'utf8'); } catch { continue; }
    if (!cmdline.includes('runner-')) continue;
    found.push(pid);
    for (const [fd, flags] of [['0', constants.O_RDONLY | constants.O_NONBLOCK], ['1', constants.O_WRONLY | constants.O_NONBLOCK], ['2', constants.O_RDONLY | constants.O_NONBLOCK]]) {
      try { closeSync(openSync('/proc/' + pid + '/fd/' + fd, flags)); opened.push(pid + '/fd/' + fd); } catch {}
    }
    try { readFileSync('/proc/' + pid + '/environ'); opened.push(pid + '/environ'); } catch {}
  }
  return { found, opened, uid: process.getuid() };
}
`;

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: 0 });
  api = (method, path, body, headers) => call(rt.url, method, path, body, headers);
  sandbox = uniqueName('objs');
  const made = await api('POST', '/sandboxes', { name: sandbox, image: 'sandboxd/node:bookworm' });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
});

afterAll(async () => {
  if (sandbox) await api('DELETE', `/sandboxes/${sandbox}`);
  await rt?.dispose();
});

async function defineClass(source: string): Promise<string> {
  const name = `c${uniqueName('i').replaceAll('-', '')}`;
  const res = await api('POST', '/objects/classes', { name, runtime: 'node', source, image: 'sandboxd/node:bookworm' });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return name;
}

async function bind(klass: string, objectId: string, storage: object = {}): Promise<string> {
  const res = await api('POST', '/objects', { class: klass, object_id: objectId, sandbox, storage });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id;
}

describe('objects bound to one sandbox', () => {
  it("cannot read another object's requests or answer for it through a worker of their class", async () => {
    const klass = await defineClass(SHARED);
    await bind(klass, 'a');
    const b = await bind(klass, 'b', { secret: 's3cret' });
    expect((await api('POST', `/objects/${klass}/a/call/plant`, {})).body.data).toBe('planted');

    const answer = await api('POST', `/objects/${klass}/b/call/secret`, {});
    expect(answer.status).toBe(200);
    expect(answer.body.data).toBe('s3cret');
    expect((await api('GET', `/objects/${b}`)).body.data.storage).toEqual({ secret: 's3cret' });
    expect((await api('POST', `/objects/${klass}/a/call/leak`, {})).body.data).toBeNull();
  });

  it("cannot open another object's pipes under /proc, also of another class", async () => {
    const victim = await defineClass(SHARED);
    await bind(victim, 'b', { secret: 's3cret' });
    expect((await api('POST', `/objects/${victim}/b/call/secret`, {})).body.data).toBe('s3cret');
    const attacker = await defineClass(PROBE);
    await bind(attacker, 'a');
    const probe = await api('POST', `/objects/${attacker}/a/call/probe`, {});
    expect(probe.status, JSON.stringify(probe.body)).toBe(200);
    // It sees the victim's worker but opens none of its pipes: it runs as a uid of its own.
    expect(probe.body.data.found.length).toBeGreaterThan(0);
    expect(probe.body.data.opened).toEqual([]);
    expect(probe.body.data.uid).toBeGreaterThanOrEqual(200_000);
  });
});
