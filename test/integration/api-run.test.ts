import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker } from '../helpers/docker.js';
import { call, dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';

let rt: DockerRuntime;
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);

beforeAll(async () => {
  rt = await dockerRuntime({ imageDetection: 'ruby=sandboxd/python:bookworm', poolSize: 2 });
  await rt.services.pool.settled();
});

afterAll(async () => {
  await rt.dispose();
});

interface SseEvent {
  event: string;
  data: any;
  at: number;
}

/** POSTs to /run/stream and collects its events with their arrival times; `until` may stop early. */
async function streamRun(body: unknown, until?: (event: SseEvent) => boolean): Promise<SseEvent[]> {
  const abort = new AbortController();
  const res = await fetch(`${rt.url}/run/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: abort.signal,
  });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!event || data === undefined) continue;
        events.push({ event, data: JSON.parse(data), at: Date.now() });
        if (until?.(events.at(-1)!)) {
          abort.abort();
          return events;
        }
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  }
  return events;
}

/** Names of the one-shot run sandboxes that still exist. */
const runSandboxes = async () =>
  ((await api('GET', '/sandboxes?label=sandboxd.run:true')).body.data as { name: string }[]).map((s) => s.name);

/** Containers whose name holds `name` (a fast run's pool instance, named after it). */
const containersNamed = (name: string) => docker('ps', '-aq', '--filter', `name=sandboxd-${name}-`);

/** The command lines of the processes in a container. */
const processesOf = async (id: string) => (await docker('top', id, '-eo', 'pid,args')).split('\n').slice(1);

describe('POST /run/stream', () => {
  const command = ['sh', '-c', 'echo first; sleep 1.5; echo second >&2; exit 4'];
  /** The events after the stages: output as it is printed, then done. */
  const expectOutputThenDone = (events: SseEvent[]) => {
    expect(events.slice(-3).map((e) => e.event)).toEqual(['output', 'output', 'done']);
    const [first, second, done] = events.slice(-3);
    // `data` repeats `content` for the agentkernel SDKs, which read it.
    expect(first!.data).toEqual({ content: 'first\n', stream: 'stdout', data: 'first\n' });
    expect(second!.data).toEqual({ content: 'second\n', stream: 'stderr', data: 'second\n' });
    expect(done!.data).toMatchObject({ exit_code: 4, timed_out: false, truncated: false });
    // Streaming, not buffering: the first line arrived well before the command ended.
    expect(done!.at - first!.at).toBeGreaterThan(1000);
  };

  it('sends started, executing at once from a warm instance, output as it is printed, then done', async () => {
    await rt.services.runPool.settled();
    const events = await streamRun({ command });
    expect(events.map((e) => e.event).slice(0, 2)).toEqual(['started', 'progress']);
    expect(events[0]!.data.sandbox).toMatch(/^runner-[0-9a-f]{12}$/);
    expect(events[1]!.data).toEqual({ stage: 'executing' });
    expectOutputThenDone(events);
    // Reset and kept for the next run (test/integration/run-reuse.test.ts proves the reset).
    await rt.services.runPool.settled();
    expect(await containersNamed(events[0]!.data.sandbox)).not.toBe('');
  });

  it('goes through every stage with fast: false, in a sandbox of its own', async () => {
    const events = await streamRun({ command, fast: false });
    expect(events.map((e) => e.event).slice(0, 4)).toEqual(['started', 'progress', 'progress', 'progress']);
    expect(events[0]!.data.sandbox).toMatch(/^run-/);
    expect(events.slice(1, 4).map((e) => e.data.stage)).toEqual(['creating', 'starting', 'executing']);
    expectOutputThenDone(events);
    expect(await runSandboxes()).toEqual([]);
  });

  it('kills the command when the client disconnects: a fast run\'s container is reset, another one removed', async () => {
    for (const fast of [true, false]) {
      const events = await streamRun({ command: ['sh', '-c', 'echo waiting; sleep 60'], fast }, (e) => e.event === 'output');
      expect(events.at(-1)!.data.content).toBe('waiting\n');
      if (fast) {
        const id = await containersNamed(events[0]!.data.sandbox);
        await expect.poll(async () => (await processesOf(id)).some((args) => args.includes('sleep 60')), { timeout: 15_000 }).toBe(false);
      } else {
        await expect.poll(() => containersNamed(events[0]!.data.sandbox), { timeout: 15_000 }).toBe('');
      }
      await expect.poll(runSandboxes, { timeout: 15_000 }).toEqual([]);
    }
  });

  it('answers a bad request with an HTTP error, and a run that cannot start with an error event', async () => {
    expect((await api('POST', '/run/stream', { command: [] })).status).toBe(400);
    const events = await streamRun({ command: ['true'], image: 'sandboxd-test/no-such-image:latest' });
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { message: expect.stringContaining('not available') } });
  });
});

describe('POST /batch/run', () => {
  it('runs each command in its own sandbox, in parallel, with results in input order', async () => {
    const started = Date.now();
    const { status, body } = await api('POST', '/batch/run', {
      commands: [
        { command: ['sh', '-c', 'sleep 1.5; echo one > /tmp/shared; cat /tmp/shared'] },
        { command: ['sh', '-c', 'sleep 1.5; cat /tmp/shared 2>&1; exit 3'] },
        { command: ['true'], image: 'sandboxd-test/no-such-image:latest' },
        { command: ['echo', 'four'] },
      ],
    });
    expect(status).toBe(200);
    const [one, two, three, four] = body.data.results;
    expect(one).toEqual({ output: 'one\n', error: null, exit_code: 0, timed_out: false, truncated: false });
    // Isolation: the file written by the first command is not in the second's sandbox.
    expect(two).toMatchObject({ error: null, exit_code: 3 });
    expect(two.output).toContain('No such file or directory');
    expect(three).toMatchObject({ output: '', exit_code: null, error: expect.stringContaining('not available') });
    expect(four).toEqual({ output: 'four\n', error: null, exit_code: 0, timed_out: false, truncated: false });
    // Both 1.5 s commands ran at the same time.
    expect(Date.now() - started).toBeLessThan(2 * 1500 + 2000);
    expect(await runSandboxes()).toEqual([]);
  });

  it('refuses an empty batch', async () => {
    expect((await api('POST', '/batch/run', { commands: [] })).status).toBe(400);
  });
});

describe('image detection', () => {
  it('picks the image from the command alone, through the configurable table', async () => {
    const pip = await api('POST', '/run', { command: ['pip', '--version'] });
    expect(pip.body.data).toMatchObject({ exit_code: 0 });
    const marker = ['-c', 'import os; print(os.environ.get("PIP_BREAK_SYSTEM_PACKAGES"))'];
    // Only the Python image sets PIP_BREAK_SYSTEM_PACKAGES.
    expect((await api('POST', '/run', { command: ['/usr/bin/python3', ...marker] })).body.data.output).toBe('1\n');
    expect((await api('POST', '/run', { command: ['python3', ...marker], image: 'sandboxd/base:bookworm' })).body.data.output).toBe('None\n');
    // A configured entry: `ruby` maps to the Python image here (and exits 127 there: no ruby).
    expect((await api('POST', '/run', { command: ['ruby', '-v'] })).body.data.exit_code).toBe(127);
  });
});
