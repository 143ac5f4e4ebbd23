import { request as httpRequest } from 'node:http';
import { AgentClient } from '../src/backends/agent/agent-client.js';
import { del, post, type Api } from './core-bench.js';
import { agentSocketOf } from './pty-bench.js';
import { report, summarize, timePaired } from './stats.js';

/** Prints at once, then stays a while: the figure is the first byte, not the end. */
const COMMAND = ['sh', '-c', 'echo first; sleep 0.05; echo second'];

/** Milliseconds from sending `POST /sandboxes/{name}/exec/stream` to its first `output` event. */
function firstOutputViaApi(api: Api, name: string): Promise<number> {
  const body = Buffer.from(JSON.stringify({ command: COMMAND }));
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${api.url}/sandboxes/${name}/exec/stream`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length), accept: 'text/event-stream' } },
      (res) => {
        let seen = '';
        let first: number | undefined;
        res.on('data', (chunk: Buffer) => {
          seen += chunk.toString('utf8');
          if (first === undefined && seen.includes('event: output')) first = performance.now() - started;
        });
        res.on('end', () => (first === undefined ? reject(new Error(`no output event: ${seen.slice(0, 300)}`)) : resolve(first)));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The same from the sandbox's agent socket directly: until its first stdout frame. */
async function firstOutputViaAgent(agent: AgentClient): Promise<number> {
  const started = performance.now();
  let first: number | undefined;
  await agent.exec({ command: COMMAND, onFrame: () => void (first ??= performance.now() - started) });
  if (first === undefined) throw new Error('the agent sent no output frame');
  return first;
}

/**
 * A streamed exec's first output byte (issue 18: within 5 ms of the command printing it):
 * through the API's SSE stream against the agent's own exec on its socket, the same command in
 * the same sandbox, so that process start-up is on both sides and the difference is the API's.
 */
export async function benchStreamedExec(api: Api, n: number): Promise<void> {
  const name = `bench-stream-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const agent = new AgentClient(await agentSocketOf(api, name));
  try {
    // timePaired alternates the two and times whole commands; the first bytes are kept here
    // (warm-up calls, with negative indexes, are not).
    const ours: number[] = [];
    const plain: number[] = [];
    const keep = (samples: number[], i: number) => (ms: number) => void (i >= 0 && samples.push(ms));
    await timePaired(
      n,
      async (i) => keep(ours, i)(await firstOutputViaApi(api, name)),
      async (i) => keep(plain, i)(await firstOutputViaAgent(agent)),
      3,
    );
    report('streamed exec, first output (SSE)', summarize(ours), summarize(plain), 'agent socket directly');
  } finally {
    await del(api, `/sandboxes/${name}`);
  }
}
