import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BENCH_IMAGE, del, post, type Api } from './core-bench.js';
import { poolSize, waitForPool } from './pool-bench.js';
import { line, load, summarize, timed, verdict, type Summary } from './stats.js';

const run = promisify(execFile);
const dockerRunD = async () => (await run('docker', ['run', '-d', '--init', BENCH_IMAGE, 'sleep', 'infinity'])).stdout.trim();
const ms = (value: number) => `${value.toFixed(1)} ms`.padStart(10);
/** A figure against its target (`verdict`). */
const against = (value: number, target: number, unit = 'ms') => verdict(value <= target, `<= ${target} ${unit}`);

/** `n` calls of `work` at once, each timed from the common start to its own end. */
async function burst(n: number, work: (i: number) => Promise<unknown>): Promise<Summary> {
  return summarize(await Promise.all(Array.from({ length: n }, (_, i) => timed(() => work(i)))));
}

/**
 * Issue 27, item 1: `n` concurrent creates on a cold default pool against `n` concurrent
 * `docker run -d`, then the same burst again `gapS` seconds later (after the first burst's
 * sandboxes were deleted), which the pool should serve from what it learned.
 */
export async function benchBursts(api: Api, n: number, gapS: number): Promise<void> {
  await waitForPool(api, 1);
  const ids: string[] = [];
  const plain = await burst(n, async () => ids.push(await dockerRunD()));
  await run('docker', ['rm', '-f', ...ids]);
  const plainLoad = load();
  const create = (round: number) => (i: number) => post(api, '/sandboxes', { name: `bench-burst-${process.pid}-${round}-${i}` });
  const removeRound = (round: number) => Promise.all(Array.from({ length: n }, (_, i) => del(api, `/sandboxes/bench-burst-${process.pid}-${round}-${i}`)));
  const first = await burst(n, create(1));
  const firstLoad = load();
  await removeRound(1);
  await new Promise((resolve) => setTimeout(resolve, gapS * 1000));
  const ready = await poolSize(api);
  const second = await burst(n, create(2));
  await removeRound(2);
  line(`${n} concurrent docker run -d`, `p50 ${ms(plain.p50)}  p99 ${ms(plain.p99)}  (${plainLoad})`);
  line(`${n} concurrent creates, cold pool`, `p50 ${ms(first.p50)}  p99 ${ms(first.p99)}  (${firstLoad}) | p99 ratio ${(first.p99 / plain.p99).toFixed(2)}x ${against(first.p99 / plain.p99, 1, 'x')}`);
  line(`the same burst ${gapS} s later`, `p50 ${ms(second.p50)}  p99 ${ms(second.p99)}  (${ready} ready before it, ${load()}) | p50 ${against(second.p50, 50)}, p99 ${against(second.p99, 250)}`);
}

/**
 * Issue 27, items 1 and 3: create and first exec (`true`), one after another, against `docker
 * run -d` and `docker exec` of the same image; `pooled` waits for a ready claim container
 * before each create, as a steady client meets the pool.
 */
export async function benchCreateFirstExec(api: Api, n: number, pooled: boolean): Promise<void> {
  const ours: number[] = [];
  const plain: number[] = [];
  const ids: string[] = [];
  for (let i = -2; i < n; i++) {
    if (pooled) await waitForPool(api, 1);
    const name = `bench-first-${process.pid}-${pooled ? 'p' : 'c'}${i + 2}`;
    const a = await timed(async () => {
      await post(api, '/sandboxes', { name });
      await post(api, `/sandboxes/${name}/exec`, { command: ['true'] });
    });
    const b = await timed(async () => {
      const id = await dockerRunD();
      ids.push(id);
      await run('docker', ['exec', id, 'true']);
    });
    await del(api, `/sandboxes/${name}`);
    if (i >= 0) ours.push(a), plain.push(b);
  }
  await run('docker', ['rm', '-f', ...ids]);
  const [o, p] = [summarize(ours), summarize(plain)];
  const verdict = pooled ? `p50 ${against(o.p50, 25)}` : `ratio ${(o.p50 / p.p50).toFixed(2)}x ${against(o.p50 / p.p50, 1, 'x')}`;
  line(`create + first exec, ${pooled ? 'ready pool' : 'no pool'}`, `p50 ${ms(o.p50)}  p95 ${ms(o.p95)} | docker run -d + docker exec p50 ${ms(p.p50)}  p95 ${ms(p.p95)} | ${verdict}  (${load()})`);
}

/**
 * Issue 27, item 2: what a client waits for when it deletes a running sandbox, against `docker
 * rm -f` of a plain running container; then how long until the engine has removed every one.
 */
export async function benchDeletes(api: Api, n: number): Promise<void> {
  const names = Array.from({ length: n }, (_, i) => `bench-del-${process.pid}-${i}`);
  for (const name of names) await post(api, '/sandboxes', { name });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await dockerRunD());
  const ours: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < n; i++) {
    ours.push(await timed(() => del(api, `/sandboxes/${names[i]}`)));
    plain.push(await timed(() => run('docker', ['rm', '-f', ids[i] ?? ''])));
  }
  const started = performance.now();
  const emptied = await containersGone(`bench-del-${process.pid}-`);
  const gone = emptied ? `engine done ${(performance.now() - started).toFixed(0)} ms after the last answer` : 'containers left after 300 s';
  const [o, p] = [summarize(ours), summarize(plain)];
  line('delete a running sandbox', `p50 ${ms(o.p50)}  p95 ${ms(o.p95)} | docker rm -f p50 ${ms(p.p50)}  p95 ${ms(p.p95)} | p50 ${against(o.p50, 20)}  (${gone}, ${load()})`);
}

/** Whether the engine came to hold no container whose name starts with `sandboxd-<prefix>` within `timeoutMs`. */
export async function containersGone(prefix: string, timeoutMs = 300_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { stdout } = await run('docker', ['ps', '-aq', '--filter', `name=sandboxd-${prefix}`]);
    if (stdout.trim() === '') return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
