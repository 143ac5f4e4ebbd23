import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CLI, runCli } from '../helpers/server-process.js';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

const KEY = 'pty-test-key-0123456789';
const auth = { authorization: `Bearer ${KEY}` };
let rt: DockerRuntime;
const name = uniqueName('pty');
const stopped = uniqueName('pty-stopped');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body, auth);
const wsUrl = (path: string) => rt.url.replace(/^http/, 'ws') + path;

/** A terminal client: what it read so far, and how it ended. */
interface Client {
  ws: WebSocket;
  output: () => string;
  /** Resolves once the output holds `text` (fails the test past 10 s). */
  waitFor(text: string): Promise<void>;
  /** The control messages (exit) and the close code. */
  closed: Promise<{ code: number; messages: unknown[] }>;
}

/** Opens a terminal; rejects with the HTTP status when the server refuses the upgrade. */
function open(path: string, headers: Record<string, string> = auth): Promise<Client> {
  const ws = new WebSocket(wsUrl(path), { headers });
  let output = '';
  const messages: unknown[] = [];
  const waiters: { text: string; resolve: () => void }[] = [];
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return void messages.push(JSON.parse(data.toString('utf8')));
    output += data.toString('utf8');
    for (const waiter of [...waiters]) if (output.includes(waiter.text)) waiter.resolve();
  });
  const closed = new Promise<{ code: number; messages: unknown[] }>((resolve) => ws.once('close', (code) => resolve({ code, messages })));
  return new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })));
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        output: () => output,
        closed,
        waitFor: (text) =>
          output.includes(text)
            ? Promise.resolve()
            : new Promise<void>((done, fail) => {
                const timer = setTimeout(() => fail(new Error(`no '${text}' in ${JSON.stringify(output)}`)), 10_000);
                waiters.push({ text, resolve: () => (clearTimeout(timer), done()) });
              }),
      }),
    );
  });
}

const refusal = (path: string, headers?: Record<string, string>) => open(path, headers).then(() => 0, (err: { status?: number }) => err.status);

beforeAll(async () => {
  rt = await dockerRuntime({ apiKeys: [KEY] });
  for (const sandbox of [name, stopped]) expect((await api('POST', '/sandboxes', { name: sandbox })).status).toBe(201);
  expect((await api('POST', `/sandboxes/${stopped}/stop`)).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await rt?.dispose();
});

describe('terminals over WebSocket', () => {
  it('runs the shell as the default user in the workdir: echo, resize, exit status', async () => {
    const term = await open(`/sandboxes/${name}/pty?cols=100&rows=30`);
    term.ws.send("echo h''i; id -un; pwd; stty size\n");
    await term.waitFor('hi\r\n');
    await term.waitFor('30 100\r\n');
    expect(term.output()).toContain('sandbox\r\n/workspace\r\n');
    term.ws.send(JSON.stringify({ type: 'resize', cols: 132, rows: 43 }));
    term.ws.send(Buffer.from('stty size\n'));
    await term.waitFor('43 132\r\n');
    term.ws.send('exit 3\n');
    const { code, messages } = await term.closed;
    expect(messages).toEqual([{ type: 'exit', exit_code: 3 }]);
    expect(code).toBe(1000);
  });

  it('carries megabytes of output whole, with the flow held back when the client lags', async () => {
    const term = await open(`/sandboxes/${name}/pty`);
    term.ws.send("seq 1 300000; echo do''ne\n");
    // The client stops reading for a while: the server's queue passes its high-water mark.
    term.ws.pause();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    term.ws.resume();
    await term.waitFor('done\r\n');
    expect(term.output()).toContain('\r\n149999\r\n150000\r\n150001\r\n');
    expect(term.output()).toContain('\r\n299999\r\n300000\r\n');
    term.ws.close();
    await term.closed;
  }, 60_000);

  it('refuses a stopped sandbox (409), an unknown one (404), no key (401), a bad size (400)', async () => {
    expect(await refusal(`/sandboxes/${stopped}/pty`)).toBe(409);
    expect(await refusal('/sandboxes/no-such-sandbox-pty/pty')).toBe(404);
    expect(await refusal(`/sandboxes/${name}/pty`, {})).toBe(401);
    expect(await refusal(`/sandboxes/${name}/pty?cols=0`)).toBe(400);
    const plain = await api('GET', `/sandboxes/${name}/pty`);
    expect(plain.status).toBe(400);
    expect(plain.body.error).toContain('WebSocket');
  });

  it('opens with a one-use token, which expires', async () => {
    const minted = await api('POST', `/sandboxes/${name}/pty/token`);
    expect(minted.status).toBe(200);
    const { token, expires_at } = minted.body.data;
    expect(Date.parse(expires_at) - Date.now()).toBeGreaterThan(50_000);
    const term = await open(`/sandboxes/${name}/pty?token=${token}`, {});
    term.ws.send('exit\n');
    expect((await term.closed).messages).toEqual([{ type: 'exit', exit_code: 0 }]);
    expect(await refusal(`/sandboxes/${name}/pty?token=${token}`, {})).toBe(401);
    expect(await refusal(`/sandboxes/${name}/pty?token=not-a-token`, {})).toBe(401);
    const other = (await api('POST', `/sandboxes/${name}/pty/token`)).body.data.token;
    expect(await refusal(`/sandboxes/${stopped}/pty?token=${other}`, {})).toBe(401);
    expect((await api('POST', `/sandboxes/${stopped}/pty/token`)).status).toBe(409);
    // Expiry: the service's clock moves past the 60 s.
    const late = (await api('POST', `/sandboxes/${name}/pty/token`)).body.data.token;
    const terminals = rt.services.terminals as unknown as { clock: () => Date };
    const clock = terminals.clock;
    terminals.clock = () => new Date(clock().getTime() + 61_000);
    try {
      expect(await refusal(`/sandboxes/${name}/pty?token=${late}`, {})).toBe(401);
    } finally {
      terminals.clock = clock;
    }
  });

  it('closes its terminals when the sandbox stops, and kills the shell when the socket closes', async () => {
    const gone = await open(`/sandboxes/${name}/pty`);
    gone.ws.send("sleep 1234 & echo st''arted\n");
    await gone.waitFor('started');
    gone.ws.close();
    await gone.closed;
    let left = '';
    for (let i = 0; i < 50; i++) {
      left = (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'grep -l "[s]leep.1234" /proc/[0-9]*/cmdline || true'] })).body.data.stdout;
      if (left === '') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(left).toBe('');

    const term = await open(`/sandboxes/${name}/pty`);
    term.ws.send("echo re''ady\n");
    await term.waitFor('ready');
    expect((await api('POST', `/sandboxes/${name}/stop`)).status).toBe(200);
    const { code, messages } = await term.closed;
    expect(code).toBe(1001);
    expect(messages).toEqual([]);
    expect((await api('POST', `/sandboxes/${name}/start`)).status).toBe(200);
  }, 60_000);

  it('works in a restrictive (gVisor) sandbox, and closes when it is deleted', async () => {
    const restrictive = uniqueName('pty-gvisor');
    expect((await api('POST', '/sandboxes', { name: restrictive, profile: 'restrictive' })).status).toBe(201);
    const term = await open(`/sandboxes/${restrictive}/pty?cols=90&rows=20`);
    // The terminal device is the user's (the agent, without CAP_CHOWN there, opens it as the user).
    term.ws.send("echo g''v; id -un; stty size; stat -c o=%U $(tty); echo done$((1+1))\n");
    await term.waitFor('done2\r\n');
    expect(term.output()).toContain('gv\r\nsandbox\r\n');
    expect(term.output()).toContain('o=sandbox\r\n');
    expect(term.output()).toContain('20 90\r\n');
    term.ws.send('exit 5\n');
    expect((await term.closed).messages).toEqual([{ type: 'exit', exit_code: 5 }]);
    // Deleting the sandbox closes its terminals too.
    const open2 = await open(`/sandboxes/${restrictive}/pty`);
    expect((await api('DELETE', `/sandboxes/${restrictive}`)).status).toBe(200);
    expect((await open2.closed).code).toBe(1001);
  }, 60_000);
});

describe('sandboxd shell', () => {
  it('carries a real terminal: raw mode, window size at start and on change, exit status, terminal restored', async () => {
    const shell = uniqueName('pty-cli');
    expect((await api('POST', '/sandboxes', { name: shell })).status).toBe(201);
    const driver = join(import.meta.dirname, 'fixtures', 'pty-drive.py');
    const env = { ...process.env, SERVICE_URL: rt.url, SERVICE_API_KEY: KEY };
    const child = spawn('python3', [driver, process.execPath, CLI, 'shell', shell], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise((resolve) => child.once('close', resolve));
    expect({ code, stderr }).toEqual({ code: 7, stderr: '' });
    expect(stdout).toMatch(/^raw-mode\nrestored\n/);
    expect(stdout).toContain('hi\r\n30 100\r\n');
    expect(stdout).toContain('40 132\r\n');
    // Node's raw mode keeps ONLCR: the sandbox's \r\n used to reach this terminal as \r\r\n.
    expect(stdout).not.toContain('\r\r\n');
  }, 60_000);

  it('piped, runs the shell without a terminal: no prompt, no escapes, plain line ends, its exit status', async () => {
    const shell = uniqueName('pty-pipe');
    expect((await api('POST', '/sandboxes', { name: shell })).status).toBe(201);
    const child = spawn(process.execPath, [CLI, 'shell', shell], { env: { ...process.env, SERVICE_URL: rt.url, SERVICE_API_KEY: KEY }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end('echo "hi from $(hostname)"\necho oops >&2\necho "$TERM"\ntest -t 0 || echo no-tty\nexit 4\n');
    const code = await new Promise((resolve) => child.once('close', resolve));
    expect({ code, stdout, stderr }).toEqual({ code: 4, stdout: `hi from ${shell}\ndumb\nno-tty\n`, stderr: 'oops\n' });
  }, 60_000);

  it('says why it cannot open a terminal, and exits 1', async () => {
    const result = await runCli(['shell', stopped], { SERVICE_URL: rt.url, SERVICE_API_KEY: KEY });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('is stopped');
  });
});
