import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { openAgentTerminal } from '../src/backends/agent/agent-terminal.js';
import { UnixSocketTransport } from '../src/backends/agent/agent-transport.js';
import { AGENT_IN_SANDBOX } from '../src/backends/docker/agent-sockets.js';
import { LABEL } from '../src/backends/docker/container-spec.js';
import { del, post, type Api } from './core-bench.js';
import { json, send } from './http-client.js';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);

/** A terminal to type at: `type` sends one key and resolves once the terminal echoes `echo`. */
interface Keyboard {
  type(key: string, echo: string): Promise<void>;
  close(): void;
}

/** Resolves each waiter once the output since it started holds its text. */
function echoes(): { feed: (data: Buffer) => void; until: (text: string) => Promise<void> } {
  let seen = '';
  let waiter: { text: string; resolve: () => void } | undefined;
  return {
    feed: (data) => {
      seen += data.toString('latin1');
      if (waiter && seen.includes(waiter.text)) waiter.resolve();
    },
    until: (text) => {
      seen = '';
      return new Promise((resolve) => (waiter = { text, resolve }));
    },
  };
}

/** The terminal through the server's WebSocket. */
async function overWebSocket(api: Api, name: string): Promise<Keyboard> {
  const output = echoes();
  const ws = new WebSocket(`${api.url.replace(/^http/, 'ws')}/sandboxes/${name}/pty?cols=80&rows=24`);
  ws.on('message', (data: Buffer, isBinary: boolean) => isBinary && output.feed(data));
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  return {
    type: (key, echo) => {
      const echoed = output.until(echo);
      ws.send(Buffer.from(key), { binary: true });
      return echoed;
    },
    close: () => ws.close(),
  };
}

/** The transport to a Docker sandbox's agent socket on the host, as the server uses it. */
export async function agentSocketOf(api: Api, name: string): Promise<UnixSocketTransport> {
  const { uuid } = (json(await send('GET', `${api.url}/sandboxes/${name}`)) as { data: { uuid: string } }).data;
  const { stdout } = await run('docker', ['ps', '-q', '--filter', `label=${LABEL.uuid}=${uuid}`]);
  const { stdout: mounts } = await run('docker', ['inspect', '--format', '{{json .Mounts}}', stdout.trim()]);
  const dir = (JSON.parse(mounts) as { Source: string; Destination: string }[]).find((m) => m.Destination === AGENT_IN_SANDBOX.dir)!.Source;
  return new UnixSocketTransport(async () => join(dir, 'agent.sock'));
}

/** The same terminal straight from the sandbox's agent socket, as the server opens it. */
async function overAgentSocket(api: Api, name: string): Promise<Keyboard> {
  const output = echoes();
  const terminal = await openAgentTerminal(await agentSocketOf(api, name), { cols: 80, rows: 24 }, output.feed);
  return {
    type: (key, echo) => {
      const echoed = output.until(echo);
      terminal.write(Buffer.from(key));
      return echoed;
    },
    close: () => terminal.close(),
  };
}

/**
 * Keystroke echo round trip at a bash prompt: a key typed, until its echo is back. Keys
 * alternate between a letter and a backspace, so the line stays short. Through the server's
 * WebSocket against the same through the sandbox agent's socket directly.
 */
export async function benchPty(api: Api, n: number): Promise<void> {
  const name = `bench-pty-${process.pid}`;
  await post(api, '/sandboxes', { name });
  const ours = await overWebSocket(api, name);
  const plain = await overAgentSocket(api, name);
  try {
    // The prompt of each shell is up once a first key echoes.
    await ours.type('x', 'x');
    await plain.type('x', 'x');
    const key = (keyboard: Keyboard, i: number) => (i % 2 === 0 ? keyboard.type('\x7f', '\b') : keyboard.type('x', 'x'));
    const figures = await timePaired(n, (i) => key(ours, i), (i) => key(plain, i), 10);
    report('pty keystroke echo (WebSocket)', figures.ours, figures.plain, 'agent socket directly');
  } finally {
    ours.close();
    plain.close();
    await del(api, `/sandboxes/${name}`);
  }
}
