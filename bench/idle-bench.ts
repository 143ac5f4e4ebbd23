import { readdirSync, readFileSync } from 'node:fs';
import { del, post, type Api } from './core-bench.js';
import { send } from './http-client.js';
import { containersGone } from './scale-bench.js';
import { line, load, summarize, timed, verdict } from './stats.js';

/** The server's resident memory (MiB) and open file descriptors, from /proc. */
function footprint(pid: number): { rssMb: number; fds: number } {
  const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  return { rssMb: rssKb / 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** `total` calls of `work`, `clients` at a time. */
async function inParallel(total: number, clients: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < total) await work(next++);
  }));
}

/**
 * Issue 27, item 6: `n` idle moderate sandboxes on one server (pid `pid`): the time to create
 * them, exec into sampled ones and list them all while they idle, the server's memory and file
 * descriptors (at the peak, and after the agent connections' idle timeout), and the time to
 * delete them all until the engine holds none.
 */
export async function benchIdle(api: Api & { pid: number }, n: number): Promise<void> {
  const prefix = `bench-idle-${process.pid}-`;
  const name = (i: number) => `${prefix}${i}`;
  const created = await timed(() => inParallel(n, 8, (i) => post(api, '/sandboxes', { name: name(i) })));
  line(`${n} idle sandboxes created`, `${(created / 1000).toFixed(1)} s with 8 clients (${load()})`);
  // Touch every sandbox's agent at once, so that the connections peak as a busy client makes them.
  await inParallel(n, 32, (i) => post(api, `/sandboxes/${name(i)}/exec`, { command: ['true'] }));
  const peak = footprint(api.pid);
  const execs: number[] = [];
  for (let i = 0; i < 200; i++) {
    const sampled = name(Math.floor(Math.random() * n));
    execs.push(await timed(() => post(api, `/sandboxes/${sampled}/exec`, { command: ['true'] })));
  }
  const lists: number[] = [];
  for (let i = 0; i < 20; i++) lists.push(await timed(() => send('GET', `${api.url}/sandboxes`)));
  // The pool's idle timeout (15 s) passes: the agent connections no request uses are closed.
  await new Promise((resolve) => setTimeout(resolve, 20_000));
  const rested = footprint(api.pid);
  const [exec, list] = [summarize(execs), summarize(lists)];
  line('exec into a sampled idle sandbox', `p50 ${exec.p50.toFixed(1)} ms  p99 ${exec.p99.toFixed(1)} ms | ${verdict(exec.p99 <= 50, 'p99 <= 50 ms')}`);
  line(`GET /sandboxes of ${n}`, `p50 ${list.p50.toFixed(1)} ms  p95 ${list.p95.toFixed(1)} ms | ${verdict(list.p50 <= 50, 'p50 <= 50 ms')}`);
  line('server RSS, file descriptors', `peak ${peak.rssMb.toFixed(0)} MiB, ${peak.fds} fds; after 20 s idle ${rested.rssMb.toFixed(0)} MiB, ${rested.fds} fds | ${verdict(Math.max(peak.rssMb, rested.rssMb) <= 500, 'RSS <= 500 MB')}`);
  const started = performance.now();
  await inParallel(n, 8, (i) => del(api, `/sandboxes/${name(i)}`));
  const answered = performance.now() - started;
  const emptied = await containersGone(prefix);
  const gone = performance.now() - started;
  const after = emptied ? `engine empty after ${(gone / 1000).toFixed(1)} s` : `containers left after ${(gone / 1000).toFixed(0)} s`;
  line(`${n} sandboxes deleted`, `answered in ${(answered / 1000).toFixed(1)} s, ${after} | ${verdict(emptied && gone <= 60_000, '<= 60 s')}  (${load()})`);
}
