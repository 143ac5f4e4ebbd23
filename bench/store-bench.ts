import { createClient } from '@redis/client';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { json, send } from './http-client.js';
import { report, summarize, timePaired, timed } from './stats.js';

interface Server {
  url: string;
  dataDir: string;
}

const ROWS = 10_000;

/** Creates a store and answers its id; throws with the server's answer otherwise. */
async function createStore(server: Server, name: string, kind: string): Promise<string> {
  const created = await send('POST', `${server.url}/stores`, { name, kind });
  if (created.status !== 201) throw new Error(`store ${name} not created: ${created.body.toString()}`);
  return json(created).data.id as string;
}

/**
 * A point query on a host sqlite store of 10,000 rows through the API (HTTP, the service, a
 * worker process) beside the same prepared statement run with better-sqlite3 directly on the
 * store's file in this process: what the API and the worker hop cost (target p50 <= 3 ms).
 */
export async function benchSqlitePointQuery(server: Server, n: number): Promise<void> {
  const name = `bench-sqlite-${process.pid}`;
  const id = await createStore(server, name, 'sqlite');
  const execute = (body: object) => send('POST', `${server.url}/stores/${name}/execute`, body);
  await execute({ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)' });
  await execute({
    sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS}) INSERT INTO t SELECT i, 'row ' || i FROM n`,
  });
  const direct = new Database(join(server.dataDir, 'stores', `${id}.sqlite`), { readonly: true });
  const statement = direct.prepare('SELECT * FROM t WHERE id = ?').raw(true);
  const row = (i: number) => 1 + (Math.abs(i * 7919) % ROWS);
  try {
    const { ours, plain } = await timePaired(
      n,
      async (i) => {
        const res = await send('POST', `${server.url}/stores/${name}/query`, { sql: 'SELECT * FROM t WHERE id = ?', params: [row(i)] });
        if (res.status !== 200) throw new Error(`query failed: ${res.body.toString()}`);
      },
      async (i) => statement.get(row(i)),
      5,
    );
    report('sqlite point query (API; target <= 3 ms)', ours, plain, 'better-sqlite3 directly');
  } finally {
    direct.close();
    await send('DELETE', `${server.url}/stores/${name}`);
  }
}

/**
 * GET of a small value from a kv store through the API beside the same GET sent to the Redis
 * server on this machine with @redis/client (target p50 <= 2 ms).
 */
export async function benchKvGet(server: Server, n: number): Promise<void> {
  const name = `bench-kv-${process.pid}`;
  await createStore(server, name, 'kv');
  const key = `sandboxd-bench:${process.pid}`;
  const value = { user: 'ada', visits: 42 };
  const redis = createClient({ url: 'redis://127.0.0.1:6379' });
  await redis.connect();
  try {
    await send('POST', `${server.url}/stores/${name}/command`, { command: ['SET', 'k', value] });
    await redis.set(key, JSON.stringify(value));
    const { ours, plain } = await timePaired(
      n,
      async () => {
        const res = await send('POST', `${server.url}/stores/${name}/command`, { command: ['GET', 'k'] });
        if (res.status !== 200) throw new Error(`GET failed: ${res.body.toString()}`);
      },
      async () => JSON.parse((await redis.get(key)) ?? 'null'),
      5,
    );
    report('kv GET (API; target <= 2 ms)', ours, plain, 'Redis GET (@redis/client)');
  } finally {
    await redis.del(key);
    await redis.close();
    await send('DELETE', `${server.url}/stores/${name}`);
  }
}

/**
 * An endless `WITH RECURSIVE` on a host sqlite store with timeout_ms 2000: when its 504 comes
 * (target 2000 +- 200 ms), and GET /health every 10 ms meanwhile (target p99 < 20 ms) beside
 * GET /health for as long with nothing else running.
 */
export async function benchRunawayQuery(server: Server): Promise<void> {
  const name = `bench-runaway-${process.pid}`;
  await createStore(server, name, 'sqlite');
  const timeoutMs = 2000;
  const healthFor = async (ms: number): Promise<number[]> => {
    const samples: number[] = [];
    const end = performance.now() + ms;
    while (performance.now() < end) {
      samples.push(await timed(() => send('GET', `${server.url}/health`)));
      await new Promise((r) => setTimeout(r, 10));
    }
    return samples;
  };
  try {
    const idle = summarizeP99(await healthFor(timeoutMs));
    const started = performance.now();
    const runaway = send('POST', `${server.url}/stores/${name}/query`, {
      sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c',
      timeout_ms: timeoutMs,
    }).then((res) => ({ status: res.status, ms: performance.now() - started }));
    const during = summarizeP99(await healthFor(timeoutMs - 100));
    const answer = await runaway;
    const fmt = (ms: number) => `${ms.toFixed(1)} ms`.padStart(9);
    process.stdout.write(
      `${'GET /health during a runaway query'.padEnd(40)} p50 ${fmt(during.p50)}  p99 ${fmt(during.p99)}  | ${'GET /health, idle'.padEnd(26)} p50 ${fmt(idle.p50)}  p99 ${fmt(idle.p99)}  | target p99 < 20 ms\n` +
        `${'runaway query answered'.padEnd(40)} ${answer.status} after ${answer.ms.toFixed(0)} ms (timeout_ms ${timeoutMs}; target +- 200 ms)\n`,
    );
  } finally {
    await send('DELETE', `${server.url}/stores/${name}`);
  }
}

function summarizeP99(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: summarize(sorted).p50, p99: sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? NaN };
}
