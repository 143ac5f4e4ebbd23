import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InstanceState, WorkerRequest } from '../../src/backends/backend.js';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { WorkerFailed } from '../../src/errors.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { TEST_IMAGE, removeInstanceContainers, sandboxSpec, uniqueName } from '../helpers/docker.js';

const NODE_IMAGE = 'sandboxd/node:bookworm';
const PYTHON_IMAGE = 'sandboxd/python:bookworm';

const instanceId = uniqueName('itest-workers');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-workers-'));
const backend = new DockerBackend({ instanceId, dataDir, logger: silentLogger() });
const workers = backend.capabilities.workers!;

/** Answers `NONCE who` with the worker's user, `NONCE hang` never (a grandchild in its own session sleeps meanwhile). */
const SH_WORKER: WorkerRequest = {
  command: [
    'sh',
    '-c',
    'while IFS= read -r l; do n=${l%% *}; case "${l#* }" in hang) setsid sleep 4181 & sleep 4182 ;; *) echo "$n $(id -un) $(id -u)" ;; esac; done',
  ],
};

/** A node and a python worker: each line is `NONCE {"a":1,"b":2}`, answered `NONCE {"sum":3,"runtime":...}`, with a log line on stderr. */
const NODE_WORKER: WorkerRequest = {
  command: [
    'node',
    '-e',
    `require('readline').createInterface({ input: process.stdin }).on('line', (line) => {
      const space = line.indexOf(' ');
      const request = JSON.parse(line.slice(space + 1));
      console.error('log from node');
      process.stdout.write(line.slice(0, space) + ' ' + JSON.stringify({ sum: request.a + request.b, runtime: 'node' }) + '\\n');
    });`,
  ],
};
const PYTHON_WORKER: WorkerRequest = {
  command: [
    'python3',
    '-c',
    `import json, sys
while True:
    line = sys.stdin.readline()
    if not line:
        break
    nonce, _, rest = line.rstrip("\\n").partition(" ")
    request = json.loads(rest)
    print("log from python", file=sys.stderr, flush=True)
    sys.stdout.write(nonce + " " + json.dumps({"sum": request["a"] + request["b"], "runtime": "python"}, separators=(",", ":")) + "\\n")
    sys.stdout.flush()
`,
  ],
};

let nonces = 0;
const call = async (id: string, key: string, request: string, timeout_ms = 30_000) => {
  const nonce = `n${++nonces}`;
  return { nonce, ...(await workers.callWorker(id, key, { nonce, line: `${nonce} ${request}`, timeout_ms })) };
};

/** The command lines of every process in the sandbox, one per line. */
const processes = async (id: string) =>
  (await backend.exec(id, { command: ['sh', '-c', 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done 2>/dev/null'], timeout_ms: 30_000 })).stdout;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const sandboxes: Record<'nodeModerate' | 'nodeRestrictive' | 'pythonModerate' | 'pythonRestrictive', InstanceState> = {} as never;

beforeAll(async () => {
  const [nodeModerate, nodeRestrictive, pythonModerate, pythonRestrictive] = await Promise.all([
    backend.create(sandboxSpec({ image: NODE_IMAGE })),
    backend.create(sandboxSpec({ image: NODE_IMAGE, profile: 'restrictive' })),
    backend.create(sandboxSpec({ image: PYTHON_IMAGE })),
    backend.create(sandboxSpec({ image: PYTHON_IMAGE, profile: 'restrictive' })),
  ]);
  Object.assign(sandboxes, { nodeModerate, nodeRestrictive, pythonModerate, pythonRestrictive });
  expect(nodeRestrictive.runtime).toBe('runsc');
});

afterAll(async () => {
  await removeInstanceContainers(instanceId);
  await backend.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe.each([
  ['moderate (runc)', () => sandboxes.nodeModerate],
  ['restrictive (gVisor)', () => sandboxes.nodeRestrictive],
])('workers in a %s sandbox', (_profile, sandbox) => {
  it('run as the sandbox default user and survive unrelated execs ending', async () => {
    const { id } = sandbox();
    const key = uniqueName('who');
    const started = await workers.ensureWorker(id, key, SH_WORKER);
    const first = await call(id, key, 'who');
    expect(first.line).toBe(`${first.nonce} sandbox 1000`);
    const status = (await backend.exec(id, { command: ['cat', `/proc/${started.pid}/status`], timeout_ms: 30_000 })).stdout;
    expect(status).toMatch(/^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    // An exec's processes end with it, a timed-out one's too: none of that reaches the worker.
    expect((await backend.exec(id, { command: ['sh', '-c', 'sleep 60 & echo left'], timeout_ms: 30_000 })).stdout).toBe('left\n');
    expect((await backend.exec(id, { command: ['sleep', '30'], timeout_ms: 300 })).timed_out).toBe(true);
    expect((await backend.exec(id, { command: ['true'], timeout_ms: 30_000 })).exit_code).toBe(0);
    const after = await call(id, key, 'who');
    expect(after.line).toBe(`${after.nonce} sandbox 1000`);
    expect((await workers.listWorkers(id)).find((worker) => worker.key === key)).toMatchObject({ pid: started.pid, started: false });
    await workers.stopWorker(id, key);
  });

  it('a timeout kills the whole tree, a grandchild in its own session included', async () => {
    const { id } = sandbox();
    const key = uniqueName('tree');
    await workers.ensureWorker(id, key, SH_WORKER);
    await expect(call(id, key, 'hang', 500)).rejects.toMatchObject({ code: 'TIMEOUT' });
    await expect.poll(async () => (await processes(id)).match(/sleep 418[12]/g) ?? [], { timeout: 10_000 }).toEqual([]);
    expect(await workers.listWorkers(id)).toEqual([]);
    expect((await workers.ensureWorker(id, key, SH_WORKER)).started).toBe(true);
    await workers.stopWorker(id, key);
  });

  it('a missing interpreter fails to start as a shell would (127)', async () => {
    const failure = await workers.ensureWorker(sandbox().id, uniqueName('none'), { command: ['no-such-interpreter'] }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkerFailed);
    expect(failure).toMatchObject({ code: 'METHOD_FAILED', details: { reason: 'exited', exit_code: 127, stderr: expect.stringContaining('no-such-interpreter') } });
  });
});

describe.each([
  ['node', 'moderate (runc)', () => sandboxes.nodeModerate, NODE_WORKER],
  ['node', 'restrictive (gVisor)', () => sandboxes.nodeRestrictive, NODE_WORKER],
  ['python', 'moderate (runc)', () => sandboxes.pythonModerate, PYTHON_WORKER],
  ['python', 'restrictive (gVisor)', () => sandboxes.pythonRestrictive, PYTHON_WORKER],
])('a %s worker in a %s sandbox', (runtime, profile, sandbox, request) => {
  it('answers call after call, with its stderr', async () => {
    const { id } = sandbox();
    const key = uniqueName(runtime);
    expect((await workers.ensureWorker(id, key, request)).started).toBe(true);
    const walls: number[] = [];
    const inside: number[] = [];
    for (let i = 0; i < 20; i++) {
      const wall = performance.now();
      const reply = await call(id, key, JSON.stringify({ a: i, b: 2 }));
      walls.push(performance.now() - wall);
      inside.push(reply.duration_ms);
      expect(reply.line).toBe(`${reply.nonce} ${JSON.stringify({ sum: i + 2, runtime })}`);
      expect(reply.stderr).toBe(`log from ${runtime}\n`);
    }
    // Observed, not asserted (the machine is shared): the backend's round trip and the agent's part of it.
    console.log(`${runtime} worker, ${profile}: warm call median ${median(walls.slice(1)).toFixed(2)} ms through the backend, ${median(inside.slice(1)).toFixed(2)} ms in the agent`);
    expect((await workers.ensureWorker(id, key, request)).started).toBe(false);
    await workers.stopWorker(id, key);
  });
});

describe('workers and reuse', () => {
  it('a reset kills every worker of a reusable sandbox', async () => {
    const reusable = await backend.create(sandboxSpec({ image: TEST_IMAGE, role: 'pool', reusable: true }));
    const key = uniqueName('reset');
    await workers.ensureWorker(reusable.id, key, SH_WORKER);
    expect(await workers.listWorkers(reusable.id)).toHaveLength(1);
    await backend.capabilities.reuse!.reset(reusable.id);
    expect(await workers.listWorkers(reusable.id)).toEqual([]);
    await expect(call(reusable.id, key, 'who')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await workers.ensureWorker(reusable.id, key, SH_WORKER)).started).toBe(true);
    const reply = await call(reusable.id, key, 'who');
    expect(reply.line).toBe(`${reply.nonce} sandbox 1000`);
  });
});
