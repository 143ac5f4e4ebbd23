import { json, send } from './http-client.js';
import { report, summarize, timePaired, timed } from './stats.js';

interface Server {
  url: string;
}

const NODE_SOURCE = `
export function increment(args, ctx) { const n = ctx.storage.get('count', 0) + 1; ctx.storage.put('count', n); return n; }
export function ring(args, ctx) { ctx.storage.put('lag_' + args.i, ctx.now.getTime() - Date.parse(args.due)); }
`;
const PYTHON_SOURCE = `
def increment(args, ctx):
    n = ctx.storage.get('count', 0) + 1
    ctx.storage.put('count', n)
    return n
`;

async function ok<T = any>(method: string, url: string, body?: object): Promise<T> {
  const res = await send(method, url, body);
  const parsed = json(res) as { success: boolean; data: T; error?: string };
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${parsed.error ?? ''}`);
  return parsed.data;
}

async function defineClass(server: Server, name: string, runtime: 'node' | 'python'): Promise<void> {
  await ok('POST', `${server.url}/objects/classes`, { name, runtime, source: runtime === 'node' ? NODE_SOURCE : PYTHON_SOURCE });
}

/** Deletes a class's objects (and so their sandboxes) and the class. */
async function removeClass(server: Server, name: string): Promise<void> {
  for (const object of await ok<{ id: string }[]>('GET', `${server.url}/objects?class=${name}&limit=1000`)) await ok('DELETE', `${server.url}/objects/${object.id}`);
  await ok('DELETE', `${server.url}/objects/classes/${name}`);
}

/**
 * Warm calls through the API (a persistent worker answers) against a bare exec, through the
 * same API, of the same runner with the same request: the process-per-call cost it replaces.
 */
export async function benchObjectCalls(server: Server, n: number, runtime: 'node' | 'python'): Promise<void> {
  const klass = `bench_${runtime}`;
  await defineClass(server, klass, runtime);
  const callUrl = `${server.url}/objects/${klass}/warm/call/increment`;
  for (let i = 0; i < 3; i++) await ok('POST', callUrl, {});
  const object = await ok<{ id: string; sandbox: string; storage: object }>('GET', `${server.url}/objects/${klass}/warm`);
  const listing = await ok<{ stdout: string }>('POST', `${server.url}/sandboxes/${object.sandbox}/exec`, {
    command: ['sh', '-c', 'ls /workspace/.sandboxd/objects/runner-*'],
  });
  const runner = listing.stdout.split('\n').find((path) => path.endsWith(runtime === 'node' ? '.mjs' : '.py'))!;
  const request = JSON.stringify({
    nonce: 'bench',
    module: `/workspace/.sandboxd/objects/${klass}/v1/index.${runtime === 'node' ? 'mjs' : 'py'}`,
    method: 'increment',
    args: {},
    storage: object.storage,
    alarm: null,
    object: { id: object.id, class: klass, object_id: 'warm' },
    now: new Date().toISOString(),
    call_id: 'bench',
  });
  const command = runtime === 'node' ? ['node', runner] : ['python3', '-u', runner];
  const paired = await timePaired(
    n,
    () => ok('POST', callUrl, {}),
    () => ok('POST', `${server.url}/sandboxes/${object.sandbox}/exec`, { command, stdin: `${request}\n`, workdir: `/workspace/.sandboxd/objects/${klass}` }),
  );
  report(`object call, warm (${runtime})`, paired.ours, paired.plain, `exec of the runner, a process per call`);
  await removeClass(server, klass);
}

/** Calls per second over `objects` objects from `clients` clients for `seconds`. */
export async function benchObjectThroughput(server: Server, seconds: number, objects = 20, clients = 8): Promise<void> {
  const klass = 'bench_rate';
  await defineClass(server, klass, 'node');
  await Promise.all(Array.from({ length: objects }, (_, i) => ok('POST', `${server.url}/objects/${klass}/o${i}/call/increment`, {})));
  let calls = 0;
  let failures = 0;
  const until = Date.now() + seconds * 1000;
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      for (let i = client; Date.now() < until; i += clients) {
        const started = performance.now();
        const res = await send('POST', `${server.url}/objects/${klass}/o${i % objects}/call/increment`, {});
        latencies.push(performance.now() - started);
        if (res.status === 200) calls++;
        else failures++;
      }
    }),
  );
  const s = summarize(latencies);
  process.stdout.write(
    `object calls, ${clients} clients over ${objects} objects: ${(calls / seconds).toFixed(0)} calls/s (p50 ${s.p50.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms, ${failures} failed; target >= 200/s)\n`,
  );
  await removeClass(server, klass);
}

/** Wake from hibernation (a stopped sandbox started, the worker started) against a sandbox start plus an exec. */
export async function benchObjectWake(server: Server, n: number): Promise<void> {
  const klass = 'bench_wake';
  await defineClass(server, klass, 'node');
  await ok('POST', `${server.url}/objects/${klass}/sleepy/call/increment`, {});
  const object = await ok<{ id: string }>('GET', `${server.url}/objects/${klass}/sleepy`);
  const plainName = `bench-wake-${process.pid}`;
  await ok('POST', `${server.url}/sandboxes`, { name: plainName, image: 'sandboxd/node:bookworm', memory_mb: 256 });
  const wakes: number[] = [];
  const starts: number[] = [];
  for (let i = 0; i < n; i++) {
    await ok('PATCH', `${server.url}/objects/${object.id}`, { status: 'hibernating' });
    wakes.push(await timed(() => ok('POST', `${server.url}/objects/${klass}/sleepy/call/increment`, {})));
    await ok('POST', `${server.url}/sandboxes/${plainName}/stop`);
    starts.push(
      await timed(async () => {
        await ok('POST', `${server.url}/sandboxes/${plainName}/start`);
        await ok('POST', `${server.url}/sandboxes/${plainName}/exec`, { command: ['node', '-e', '0'] });
      }),
    );
  }
  await ok('DELETE', `${server.url}/sandboxes/${plainName}`);
  await removeClass(server, klass);
  report('object wake from hibernation (target p50 <= 500 ms)', summarize(wakes), summarize(starts), 'sandbox start + exec of node');
}

/**
 * Alarm lag (the call's start minus the alarm's time) over `firings` alarms on 20 objects,
 * against the lag of a plain setTimeout in this process over the same waits.
 */
export async function benchAlarmLag(server: Server, firings: number): Promise<void> {
  const klass = 'bench_alarm';
  await defineClass(server, klass, 'node');
  const objects = 20;
  for (let i = 0; i < objects; i++) await ok('POST', `${server.url}/objects/${klass}/a${i}/call/increment`, {});
  const timerLags: number[] = [];
  const rounds = Math.ceil(firings / objects);
  for (let round = 0; round < rounds; round++) {
    const base = Date.now() + 1500;
    const waits: Promise<void>[] = [];
    for (let i = 0; i < objects && round * objects + i < firings; i++) {
      const due = new Date(base + i * 25);
      await ok('POST', `${server.url}/objects/${klass}/a${i}/alarm`, { at: due.toISOString(), method: 'ring', args: { i: round, due: due.toISOString() } });
      waits.push(new Promise((resolve) => setTimeout(() => resolve(void timerLags.push(Date.now() - due.getTime())), due.getTime() - Date.now())));
    }
    await Promise.all(waits);
    await waitForAlarms(server, klass, objects);
  }
  const lags: number[] = [];
  for (let i = 0; i < objects; i++) {
    const storage = (await ok<{ storage: Record<string, number> }>('GET', `${server.url}/objects/${klass}/a${i}`)).storage;
    for (const [key, value] of Object.entries(storage)) if (key.startsWith('lag_')) lags.push(value);
  }
  const sorted = [...lags].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? NaN;
  await removeClass(server, klass);
  report(`alarm lag, ${lags.length} firings (p99 ${p99} ms; target < 1000)`, summarize(lags), summarize(timerLags), 'setTimeout in the client');
}

async function waitForAlarms(server: Server, klass: string, objects: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const list = await ok<{ alarm: unknown }[]>('GET', `${server.url}/objects?class=${klass}&limit=${objects}`);
    if (list.every((o) => o.alarm === null) || Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
