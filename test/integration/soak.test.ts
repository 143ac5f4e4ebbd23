import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker } from '../helpers/docker.js';
import { dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * The soak of fast runs and execs: 1,000 fast runs and 5,000 execs in a row leave no container, process or
 * file descriptor behind, counted before and after (the server runs in this process). Fast runs
 * reuse their containers: every container left is one a pool holds.
 */
const RUNS = Number(process.env.SOAK_RUNS ?? 1000);
const EXECS = Number(process.env.SOAK_EXECS ?? 5000);
const CLIENTS = 4;

let rt: DockerRuntime;
/**
 * The soak's own client keeps exactly CLIENTS connections (fetch's pool opens more now and
 * then), so that descriptors counted in this process are the server's.
 */
const client = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
const api = (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> =>
  new Promise((resolve, reject) => {
    const req = http.request(`${rt.url}${path}`, { method, agent: client, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });

/** This process's open descriptors, as what they point at (socket:[n], pipe:[n], paths). */
const openFds = () =>
  readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      return [readlinkSync(`/proc/self/fd/${fd}`)];
    } catch {
      return []; // the descriptor of the directory listing itself, closed meanwhile
    }
  });
/** The path of the Unix socket a connected one's peer is bound to (ss names peers by inode). */
const unixPeerOf = (inode: string): string => {
  const rows = execFileSync('ss', ['-xan'], { encoding: 'utf8' }).split('\n').map((row) => row.trim().split(/\s+/));
  const peer = rows.find((row) => row[5] === inode)?.[7];
  return rows.find((row) => row[5] === peer)?.[4] ?? `socket ${peer ?? '?'}`;
};
/** What a `socket:[inode]` is, from the kernel's socket tables: a Unix socket's path, a TCP socket's addresses. */
const socketOf = (target: string): string => {
  const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
  if (!inode) return target;
  for (const table of ['unix', 'tcp', 'tcp6']) {
    const line = readFileSync(`/proc/net/${table}`, 'utf8')
      .split('\n')
      .find((row) => row.trim().split(/\s+/)[table === 'unix' ? 6 : 9] === inode);
    if (line && table === 'unix') return `${target} unix ${line.trim().split(/\s+/)[7] ?? `to ${unixPeerOf(inode)}`}`;
    if (line) return `${target} ${table} ${line.trim().split(/\s+/).slice(1, 3).join(' -> ')}`;
  }
  return target;
};
/** At most `slack` more descriptors than before; the message names the new ones. */
const expectNoMoreFds = (before: string[], slack: number) => {
  const after = openFds();
  const added = after.filter((target) => !before.includes(target));
  expect(after.length, `new descriptors: ${added.map(socketOf).join(', ')}`).toBeLessThanOrEqual(before.length + slack);
};
/** Containers of this runtime on the engine, running or not. */
const containers = async () => (await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${rt.deploymentId}`)).split('\n').filter(Boolean).sort();
/**
 * Processes inside a sandbox and the agent's open descriptors, counted by one shell with
 * builtins only, so that the count holds nothing but the agent, this shell and leftovers.
 */
const inside = async (name: string) => {
  // The server keeps as many connections to an agent as it had concurrent calls: let them go
  // (the next call connects again), so that what is counted is leftovers alone.
  await rt.backend.close();
  const count = (glob: string) => `n=0; for entry in ${glob}; do n=$((n+1)); done; echo $n`;
  const res = await api('POST', `/sandboxes/${name}/exec`, {
    command: ['sh', '-c', `${count('/proc/[0-9]*')}; ${count('/proc/1/fd/*')}`],
    sudo: true,
  });
  const [processes, agentFds] = (res.body.data.output as string).trim().split('\n').map(Number);
  return { processes, agentFds };
};

/**
 * This process's descriptors once the server has let go of its kept-alive connections to the
 * agents (the next call connects again): run containers live on between runs, and the pool may
 * hold more of them after a burst than before it, each with a connection of its own.
 */
const agentsLetGo = async () => {
  await rt.backend.close();
  // The Engine API client keeps its idle connections to docker.sock (Node's global agent keeps
  // sockets alive, up to as many as were ever busy at once, for 5 s): let them go too, so that
  // what is counted is leftovers, not how busy the engine connection was a moment ago.
  http.globalAgent.destroy();
  return settled(async () => openFds());
};

/** The value `read` gives twice in a row (at most 20 tries). */
async function settled<T>(read: () => Promise<T>): Promise<T> {
  let last = await read();
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await read();
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
  return last;
}

/** Runs `work(i)` for i < total with `clients` callers at once; the first failure stops it. */
async function repeat(total: number, clients: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) await work(next++);
    }),
  );
}

beforeAll(async () => {
  rt = await dockerRuntime({ poolSize: CLIENTS, allowSudoExec: true });
  await rt.services.pool.settled();
});

afterAll(async () => {
  client.destroy();
  await rt?.dispose();
});

describe('soak', () => {
  it(`${RUNS} fast runs leave no container and no descriptor behind`, { timeout: 900_000 }, async () => {
    // Warm up at the same concurrency (kept-alive connections, lazily loaded modules), then count.
    await repeat(4 * CLIENTS, CLIENTS, async () => void (await api('POST', '/run', { command: ['true'] })));
    await rt.services.pool.settled();
    await rt.services.runPool.settled();
    const before = { containers: await containers(), fds: await agentsLetGo() };
    await repeat(RUNS, CLIENTS, async (i) => {
      const res = await api('POST', '/run', { command: ['sh', '-c', `echo run ${i}; echo err >&2`] });
      expect(res.body.data).toMatchObject({ exit_code: 0, stdout: `run ${i}\n`, stderr: 'err\n' });
    });
    await rt.services.pool.settled();
    await rt.services.runPool.settled();
    // The claim pool holds as many ready containers as before; every other container is an
    // idle run container (reset after its runs), no more than the run pool's demand asks for.
    const key = { image: 'sandboxd/base:bookworm', profile: 'moderate' } as const;
    expect(rt.services.pool.size).toBe(CLIENTS);
    expect(rt.services.runPool.size).toBeLessThanOrEqual(rt.services.runPool.target(key));
    expect((await containers()).length).toBe(rt.services.pool.size + rt.services.runPool.size);
    await agentsLetGo();
    expectNoMoreFds(before.fds, 2);
  });

  it(`${EXECS} execs leave no process and no descriptor behind, in the sandbox or in the server`, { timeout: 900_000 }, async () => {
    const name = uniqueName('soak');
    expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
    await repeat(4 * CLIENTS, CLIENTS, async () => void (await api('POST', `/sandboxes/${name}/exec`, { command: ['true'] })));
    const before = { inside: await settled(() => inside(name)), fds: openFds() };
    await repeat(EXECS, CLIENTS, async (i) => {
      const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', `echo ${i}; sleep 0 &`] });
      expect(res.body.data).toMatchObject({ exit_code: 0, output: `${i}\n` });
    });
    // The agent sees the server's closed connections go a moment later: poll until it has.
    await expect.poll(() => inside(name), { timeout: 15_000 }).toEqual(before.inside);
    expectNoMoreFds(before.fds, 2);
    await api('DELETE', `/sandboxes/${name}`);
  });
});
