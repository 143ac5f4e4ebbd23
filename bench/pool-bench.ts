import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BENCH_IMAGE, post, type Api } from './core-bench.js';
import { report, summarize, timed } from './stats.js';

const run = promisify(execFile);
const dockerRun = () => run('docker', ['run', '--rm', BENCH_IMAGE, 'echo', 'hi']);
const fastRun = (api: Api) => post(api, '/run', { command: ['echo', 'hi'] });

/** The server's ready warm-pool containers (its metric). */
async function poolSize(api: Api): Promise<number> {
  const text = await (await fetch(`${api.url}/metrics`)).text();
  return Number(/^sandboxd_warm_pool_size (\d+)/m.exec(text)?.[1] ?? NaN);
}

async function waitForPool(api: Api, size: number, timeoutMs = 120_000): Promise<number> {
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
 * Sustained fast runs (4 clients): as many runs as the full pool holds (each finds a warm
 * container), then 5 s more once it drained (cold starts competing with the refill), and the
 * refill rate from empty to full; `docker run --rm` with the same 4 clients alongside.
 */
export async function benchPoolDrain(api: Api, size: number): Promise<void> {
  await waitForPool(api, size);
  const warm = await rate(4, 30_000, () => fastRun(api), size);
  const drained = await rate(4, 5_000, () => fastRun(api));
  const refillMs = await waitForPool(api, size);
  const plain = await rate(4, 5_000, dockerRun);
  const line = (label: string, value: string) => process.stdout.write(`${label.padEnd(40)} ${value}\n`);
  line(`fast runs, pool of ${size}, 4 clients`, `${warm.perSecond.toFixed(0)} runs/s for the ${warm.done} runs the pool held`);
  line('fast runs after the pool drained', `${drained.perSecond.toFixed(1)} runs/s (cold starts beside the refill)`);
  line('pool refill, empty to full', `${(size / (refillMs / 1000)).toFixed(1)} containers/s (${(refillMs / 1000).toFixed(1)} s for ${size})`);
  line('docker run --rm, 4 clients', `${plain.perSecond.toFixed(1)} runs/s | ratio while warm ${(warm.perSecond / plain.perSecond).toFixed(1)}x, drained ${(drained.perSecond / plain.perSecond).toFixed(1)}x`);
}
