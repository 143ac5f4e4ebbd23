import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { del, post, type Api } from './core-bench.js';
import { send } from './http-client.js';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);
const PORT = 8000;
/**
 * A kept-alive HTTP/1.1 server answering a few bytes, so that the figure is the proxy's, not the
 * server's; `/close` closes the connection after answering (as HTTP/1.0 servers do), so that each
 * request needs a new connection, through the proxy a new relay by the agent.
 */
const SERVER = `require('http').createServer((q, s) => { if (q.url === '/close') s.setHeader('connection', 'close'); s.end('ok'); }).listen(${PORT}, '0.0.0.0')`;

/** A GET that must answer 200 "ok". */
async function get(url: string, headers: Record<string, string> = {}): Promise<void> {
  const res = await send('GET', url, undefined, headers);
  if (res.status !== 200 || res.body.toString() !== 'ok') throw new Error(`${url}: HTTP ${res.status} ${res.body.toString().slice(0, 200)}`);
}

/**
 * Preview URLs: a GET through the preview proxy (path form and host form: auth, the sandbox
 * lookup, the agent's port relay on a kept-alive connection) against the same GET sent straight
 * to the sandbox's network address, interleaved in the same run. The address is the engine's,
 * whatever network the sandbox is on. A restrictive sandbox (gVisor where the engine has it, no
 * network) has no address: its figure stands beside the moderate one's direct GET.
 */
export async function benchPreview(api: Api, n: number): Promise<void> {
  const name = `bench-preview-${process.pid}`;
  const closed = `${name}-restrictive`;
  try {
    const path = await startServer(api, name, 'moderate');
    const closedPath = await startServer(api, closed, 'restrictive');
    const container = (await run('docker', ['ps', '-q', '--filter', `label=sandboxd.name=${name}`])).stdout.trim();
    const ip = (await run('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', container])).stdout.trim().split(' ')[0];
    const direct = `http://${ip}:${PORT}/`;
    const hostForm = `${api.url}/`;
    const host = `${PORT}-${name}.sandbox.localhost:${new URL(api.url).port}`;
    const paths = await timePaired(n, () => get(path), () => get(direct), 20);
    report('preview GET, path form (agent relay)', paths.ours, paths.plain, 'GET to the sandbox address');
    const hosts = await timePaired(n, () => get(hostForm, { host }), () => get(direct), 20);
    report('preview GET, host form (agent relay)', hosts.ours, hosts.plain, 'GET to the sandbox address');
    const fresh = await timePaired(n, () => get(`${path}close`), () => get(`${direct}close`), 20);
    report('preview GET, a new relay per request', fresh.ours, fresh.plain, 'same, a new connection');
    const gvisor = await timePaired(n, () => get(closedPath), () => get(direct), 20);
    report('preview GET, restrictive (no network)', gvisor.ours, gvisor.plain, 'GET to a moderate address');
  } finally {
    await del(api, `/sandboxes/${name}`);
    await del(api, `/sandboxes/${closed}`);
  }
}

/** A sandbox of `profile` running the bench server; its path-form preview URL once it answers. */
async function startServer(api: Api, name: string, profile: string): Promise<string> {
  await post(api, '/sandboxes', { name, image: 'sandboxd/node:bookworm', profile });
  await post(api, `/sandboxes/${name}/exec/detach`, { command: ['node', '-e', SERVER] });
  const path = `${api.url}/sandboxes/${name}/ports/${PORT}/`;
  for (let i = 0; ; i++) {
    const res = await send('GET', path);
    if (res.status === 200) return path;
    if (i > 100) throw new Error(`the bench server did not start: ${res.body.toString()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
