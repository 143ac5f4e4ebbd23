import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BENCH_IMAGE, post, type Api } from './core-bench.js';
import { line, load, report, summarize, timed } from './stats.js';

const run = promisify(execFile);
const dockerRun = () => run('docker', ['run', '--rm', BENCH_IMAGE, 'echo', 'hi']);
const fastRun = (api: Api) => post(api, '/run', { command: ['echo', 'hi'] });

/** The server's ready warm-pool containers (its metric). */
export async function poolSize(api: Api): Promise<number> {
  const text = await (await fetch(`${api.url}/metrics`)).text();
  return Number(/^sandboxd_warm_pool_size (\d+)/m.exec(text)?.[1] ?? NaN);
}

export async function waitForPool(api: Api, size: number, timeoutMs = 120_000): Promise<number> {
  const started = performance.now();
  while ((await poolSize(api)) < size) {
    if (performance.now() - started > timeoutMs) throw new Error(`the pool did not reach ${size}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - started;
}

/** Fast `POST /run` of `echo hi` (a warm container) against `docker run --rm` of the same image. */
export async function benchFastRun(api: Api, n: number, size: number): Promise<void> {
  await waitForPool(api, size);
  const ours: number[] = [];
  const plain: number[] = [];
  for (let i = -2; i < n; i++) {
    // Each fast run uses a container up: time the runs that find one ready, as in steady use.
    await waitForPool(api, 1);
    const a = await timed(() => fastRun(api));
    const b = await timed(dockerRun);
    if (i >= 0) ours.push(a), plain.push(b);
  }
  report('fast POST /run `echo hi`', summarize(ours), summarize(plain), 'docker run --rm');
}

/** `total` calls of `work` (or as many as `ms` allows) with `clients` concurrent callers: calls per second. */
async function rate(clients: number, ms: number, work: () => Promise<unknown>, total = Infinity): Promise<{ done: number; perSecond: number }> {
  const until = performance.now() + ms;
  const started = performance.now();
  let begun = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until && begun < total) {
        begun++;
        await work();
        done++;
      }
    }),
  );
  return { done, perSecond: done / ((performance.now() - started) / 1000) };
}



/**
 * `n` fast runs one after another, as one client in steady use makes them: p50, p95 and their
 * ratio. With reusable run containers no run pays a container start (target: p95 <= 3x p50).
 */
export async function benchSequentialRuns(api: Api, n: number): Promise<void> {
  await waitForPool(api, 1);
  const times: number[] = [];
  for (let i = -5; i < n; i++) {
    const t = await timed(() => fastRun(api));
    if (i >= 0) times.push(t);
  }
  const s = summarize(times);
  line(`${n} sequential fast runs`, `p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  p95/p50 ${(s.p95 / s.p50).toFixed(2)}  (${load()})`);
}

/**
 * Sustained fast runs with 4 clients for `seconds`, then `docker run --rm` with the same 4
 * clients for as long, in the same run (target: ours >= 10x).
 */
export async function benchSustainedRuns(api: Api, seconds: number): Promise<void> {
  await waitForPool(api, 1);
  await rate(4, 2_000, () => fastRun(api));
  const ours = await rate(4, seconds * 1000, () => fastRun(api));
  const oursLoad = load();
  const plain = await rate(4, seconds * 1000, dockerRun);
  line('fast runs, 4 clients, sustained', `${ours.perSecond.toFixed(1)} runs/s (${ours.done} in ${seconds} s, ${oursLoad})`);
  line('docker run --rm, 4 clients', `${plain.perSecond.toFixed(1)} runs/s (${plain.done} in ${seconds} s, ${load()}) | ratio ${(ours.perSecond / plain.perSecond).toFixed(1)}x`);
}
