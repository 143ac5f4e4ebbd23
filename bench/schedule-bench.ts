import { send } from './http-client.js';

interface Server {
  url: string;
}

interface Run {
  id: string;
  scheduled_for: string;
  started_at: string;
  status: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The q-quantile of ascending samples. */
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;

/**
 * Schedule lag (fired minus due) over `firings` firings of a `* * * * * *` schedule with a cheap
 * target (a /run on the server's backend: the fake one, so the figure is the scheduler's), beside
 * a plain setTimeout loop in this process aimed at the same whole seconds over the same time:
 * the lag a bare timer has under the same load. Lag is `started_at - scheduled_for` of each run
 * (when the claim committed). Prints p50 and p99 of both and their ratio.
 */
export async function benchScheduleLag(server: Server, firings: number): Promise<void> {
  const name = `bench-lag-${process.pid}`;
  const created = await send('POST', `${server.url}/schedules`, { name, cron: '* * * * * *', method: 'run', args: { command: ['true'] } });
  if (created.status !== 201) throw new Error(`schedule not created: ${created.body.toString()}`);
  const plain: number[] = [];
  let stop = false;
  // The plain loop: a setTimeout to each next whole second, lag = when it ran minus that second.
  const loop = (async () => {
    while (!stop) {
      const due = Math.floor(Date.now() / 1000) * 1000 + 1000;
      await sleep(due - Date.now());
      plain.push(Date.now() - due);
    }
  })();
  const seen = new Map<string, Run>();
  // The server keeps the last 100 runs: read them often enough that none is lost.
  while ([...seen.values()].filter((r) => r.status !== 'skipped').length < firings) {
    await sleep(Math.min(5000, (firings - seen.size) * 1000 + 500));
    const res = await send('GET', `${server.url}/schedules/${name}/runs?limit=100`);
    for (const run of JSON.parse(res.body.toString()).data as Run[]) seen.set(run.id, run);
  }
  stop = true;
  await loop;
  await send('DELETE', `${server.url}/schedules/${name}`);
  const lags = [...seen.values()]
    .filter((r) => r.status !== 'skipped')
    .map((r) => Date.parse(r.started_at) - Date.parse(r.scheduled_for))
    .slice(0, firings)
    .sort((a, b) => a - b);
  const bare = plain.sort((a, b) => a - b);
  const fmt = (ms: number) => `${ms.toFixed(1)} ms`.padStart(9);
  const [p50, p99, b50, b99] = [quantile(lags, 0.5), quantile(lags, 0.99), quantile(bare, 0.5), quantile(bare, 0.99)];
  process.stdout.write(
    `${`schedule lag (fired - due), n=${lags.length}`.padEnd(40)} p50 ${fmt(p50)}  p99 ${fmt(p99)}  | ${`setTimeout loop, n=${bare.length}`.padEnd(26)} p50 ${fmt(b50)}  p99 ${fmt(b99)}  | ratio p99 ${(p99 / Math.max(b99, 0.001)).toFixed(2)}x  (target: p99 < 1000 ms)\n`,
  );
}
