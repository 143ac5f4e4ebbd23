import Docker from 'dockerode';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DockerEgress } from '../src/backends/docker/docker-egress.js';
import { silentLogger } from '../src/telemetry/logger.js';
import { benchBrowser } from './browser-bench.js';
import { benchApiOverhead, benchCreate, benchExec, benchExecRate, benchFiles } from './core-bench.js';
import { benchAlarmLag, benchObjectCalls, benchObjectThroughput, benchObjectWake } from './object-bench.js';
import { benchObservability, startSink } from './observability-bench.js';
import { benchPolicy } from './policy-bench.js';
import { benchProxy } from './proxy-bench.js';
import { benchPty } from './pty-bench.js';
import { benchPreview } from './preview-bench.js';
import { benchStreamedExec } from './stream-bench.js';
import { benchSnapshots } from './lifecycle-bench.js';
import { benchLlmGateway } from './llm-bench.js';
import { benchScheduleLag } from './schedule-bench.js';
import { benchMapFanOut, benchStartToRunning, benchTransition } from './orchestration-bench.js';
import { benchKvGet, benchRunawayQuery, benchSqlitePointQuery } from './store-bench.js';
import { benchFastRun, benchSequentialRuns, benchSustainedRuns } from './pool-bench.js';
import { benchBursts, benchCreateFirstExec, benchDeletes } from './scale-bench.js';
import { benchIdle } from './idle-bench.js';

interface Server {
  url: string;
  dataDir: string;
  pid: number;
  stop(): Promise<void>;
}

/** Servers still running: a bench stopped by a signal stops them too, rather than leave them serving. */
const running = new Set<ChildProcess>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of running) child.kill('SIGTERM');
    process.exit(130);
  });
}

/**
 * A `sandboxd serve` child on a temporary data directory and a free port, on Docker networks and
 * packet-filter chains of its own that `stop` removes with the directory (a server keeps both for
 * its next start; the engine has address pools for about 30).
 */
async function startServer(extraArgs: string[] = []): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-bench-'));
  const cli = resolve(import.meta.dirname, '../src/cli/main.js');
  const network = `b${randomBytes(4).toString('hex')}`;
  const child: ChildProcess = spawn(
    process.execPath,
    [cli, 'serve', '--data-dir', dataDir, '--port', '0', '--log-level', 'warn', '--network-name', network, ...extraArgs],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const serverFile = join(dataDir, 'server.json');
  const deadline = Date.now() + 60_000;
  while (!existsSync(serverFile)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: (JSON.parse(readFileSync(serverFile, 'utf8')) as { url: string }).url,
    dataDir,
    pid: child.pid ?? NaN,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dataDir, { recursive: true, force: true });
      // Its networks and its packet-filter chains (a server keeps both for its next start).
      await new DockerEgress(new Docker(), network, async () => null, silentLogger()).teardown();
    },
  };
}

/** Runs `work` against a Docker server of its own, stopped afterwards. */
async function withServer(args: string[], work: (server: Server) => Promise<void>): Promise<void> {
  const server = await startServer(['--gc-interval', '0', '--reconcile-interval', '0', ...args]);
  try {
    await work(server);
  } finally {
    await server.stop();
  }
}

/** The store figures (BENCH_ONLY=stores). */
async function benchStores(fake: Server, n: number): Promise<void> {
  await benchSqlitePointQuery(fake, n * 10);
  await benchKvGet(fake, n * 10);
  await benchRunawayQuery(fake);
}

/** The durable-object figures (BENCH_ONLY=objects). */
async function benchObjects(docker: Server, n: number): Promise<void> {
  await benchObjectCalls(docker, n * 3, 'node');
  await benchObjectCalls(docker, n * 3, 'python');
  await benchObjectThroughput(docker, Number(process.env.BENCH_SECONDS ?? 10));
  await benchObjectWake(docker, Math.max(5, Math.round(n / 2)));
  await benchAlarmLag(docker, Number(process.env.BENCH_ALARMS ?? 200));
}

/**
 * The figures of sandboxes at scale (BENCH_ONLY=scale): bursts of creates on a server of their
 * own (a cold default pool), create + first exec from a ready pool and without one, deletes.
 */
async function benchScale(docker: Server, n: number): Promise<void> {
  await benchBurstsAlone();
  await benchCreateFirstExec(docker, n, true);
  await withServer(['--pool-size', '0'], (cold) => benchCreateFirstExec(cold, n, false));
  await benchDeletes(docker, n);
}

/** Two bursts of creates on a server of its own, with a cold default pool (BENCH_ONLY=bursts). */
const benchBurstsAlone = () =>
  withServer(['--pool-size', '2'], (fresh) => benchBursts(fresh, Number(process.env.BENCH_BURST ?? 50), Number(process.env.BENCH_BURST_GAP ?? 20)));

/** The orchestration figures (BENCH_ONLY=orchestrations). */
async function benchOrchestrations(docker: Server, fake: Server, n: number): Promise<void> {
  await benchTransition(fake, n * 10);
  await benchTransition(fake, n, 9_990 - n);
  await benchStartToRunning(docker, n);
  await benchMapFanOut(docker, Number(process.env.BENCH_MAP_ITEMS ?? 50), Number(process.env.BENCH_MAP_ROUNDS ?? 5));
}

/**
 * `npm run bench`: real servers on temporary data directories; each figure is printed beside
 * the plain alternative measured in the same run, interleaved. Never part of npm test.
 */
async function main(): Promise<void> {
  const n = Number(process.env.BENCH_N ?? 20);
  // BENCH_ONLY=core runs the core figures alone (runs, create, exec, files, API overhead);
  // BENCH_ONLY=runs the fast-run figures alone, BENCH_ONLY=files the file figures alone,
  // BENCH_ONLY=objects the durable-object figures alone.
  // BENCH_ONLY=policy the policy decision time alone (no server).
  // BENCH_ONLY=proxy the egress proxy's overhead and a webhook hook's decision time (in this process, fake backend).
  // BENCH_ONLY=schedules the schedule lag alone (BENCH_SCHEDULE_FIRINGS firings, default 200).
  // BENCH_ONLY=stores the store figures alone (on the fake backend: stores need no sandbox).
  // BENCH_ONLY=llm the LLM gateway figures alone (a Docker server with --proxy).
  // BENCH_ONLY=orchestrations the orchestration figures alone (transition on the fake backend, start on Docker).
  // BENCH_ONLY=pty the terminal keystroke echo alone.
  // BENCH_ONLY=preview the preview proxy against a direct request to the sandbox's address.
  // BENCH_ONLY=stream a streamed exec's first output through the API against the agent socket.
  // BENCH_ONLY=scale bursts of creates (BENCH_BURST, 50; BENCH_BURST_GAP s apart, 20), create + first exec, deletes;
  // BENCH_ONLY=bursts the bursts alone.
  // BENCH_ONLY=idle BENCH_IDLE (500) idle sandboxes on a server of their own (not in the full run: minutes).
  const only = process.env.BENCH_ONLY;
  const firings = Number(process.env.BENCH_SCHEDULE_FIRINGS ?? 200);
  const coreOnly = only === 'core';
  // BENCH_ONLY=policy: one policy decision over 100 rules, in this process (no server).
  if (only === 'policy') return benchPolicy(Number(process.env.BENCH_POLICY_BATCHES ?? 200));
  if (only === 'proxy') return benchProxy(n * 10);
  const docker = await startServer(['--gc-interval', '0', '--reconcile-interval', '0', '--pool-size', '2']);
  const fake = await startServer(['--backend', 'fake']);
  const sink = await startSink();
  const observed = await startServer(['--backend', 'fake', '--webhook-url', sink.url, '--otel-endpoint', sink.url]);
  try {
    process.stdout.write(`sandboxd bench: n=${n} per figure (BENCH_N); p50/p95; ratio = ours/plain at p50\n`);
    if (only === 'objects') return await benchObjects(docker, n);
    if (only === 'schedules') return await benchScheduleLag(fake, firings);
    if (only === 'stores') return await benchStores(fake, n);
    if (only === 'llm') return await withServer(['--proxy', '--proxy-port', '0'], (proxied) => benchLlmGateway(proxied, n * 10));
    if (only === 'orchestrations') return await benchOrchestrations(docker, fake, n);
    if (only === 'pty') return await benchPty(docker, n * 10);
    if (only === 'preview') return await benchPreview(docker, n * 10);
    if (only === 'stream') return await benchStreamedExec(docker, n * 5);
    if (only === 'scale') return await benchScale(docker, n);
    if (only === 'bursts') return await benchBurstsAlone();
    if (only === 'idle') return await withServer(['--pool-size', '2'], (server) => benchIdle(server, Number(process.env.BENCH_IDLE ?? 500)));
    if (only === 'runs' || only === 'files') {
      if (only === 'files') return await benchFiles(docker, n);
      await benchFastRun(docker, n, 2);
      await benchSequentialRuns(docker, Number(process.env.BENCH_SEQUENTIAL ?? 200));
      return await benchSustainedRuns(docker, Number(process.env.BENCH_SECONDS ?? 10));
    }
    await benchFastRun(docker, n, 2);
    await benchCreate(docker, Math.max(5, Math.round(n / 2)), 'create-to-running, from the pool');
    await withServer(['--pool-size', '0'], (cold) => benchCreate(cold, Math.max(5, Math.round(n / 2)), 'create-to-running, no pool'));
    await benchSequentialRuns(docker, Number(process.env.BENCH_SEQUENTIAL ?? 200));
    await benchSustainedRuns(docker, Number(process.env.BENCH_SECONDS ?? 10));
    await benchExec(docker, n * 3);
    await benchExecRate(docker);
    await benchFiles(docker, n);
    await benchApiOverhead(fake, n * 20);
    if (coreOnly) return;
    await benchObservability(observed, fake, n * 20);
    await benchScheduleLag(fake, firings);
    await benchSnapshots(docker, Math.max(3, Math.round(n / 4)), 'moderate');
    await benchSnapshots(docker, Math.max(3, Math.round(n / 4)), 'restrictive');
    await benchBrowser(docker, n);
    await benchObjects(docker, n);
    await benchStores(fake, n);
    await withServer(['--proxy', '--proxy-port', '0'], (proxied) => benchLlmGateway(proxied, n * 10));
    await benchProxy(n * 10);
    await benchOrchestrations(docker, fake, n);
    await benchPty(docker, n * 10);
    await benchPreview(docker, n * 10);
    await benchStreamedExec(docker, n * 5);
    await benchScale(docker, n);
  } finally {
    await docker.stop();
    await fake.stop();
    await observed.stop();
    await sink.close();
  }
}

await main();
