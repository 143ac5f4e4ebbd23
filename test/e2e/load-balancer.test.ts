import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * deploy/haproxy.cfg, run by the machine's HAProxy in front of two replicas (fake backend) that
 * share a PostgreSQL database of the test's own, and in front of one server on Docker for a
 * terminal's WebSocket.
 */
const CONFIG = resolve(import.meta.dirname, '../../deploy/haproxy.cfg');
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const database = `sandboxd_lb_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
const dirs: string[] = [];
const balancers: ChildProcess[] = [];
let replicas: ServerProcess[] = [];

const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-lb-'));
  dirs.push(dir);
  return dir;
};

/** A loopback port nothing listens on now. */
const freePort = () =>
  new Promise<number>((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });

/** HAProxy on deploy/haproxy.cfg, in front of these host:port pairs; resolves with its URL once both are up. */
async function balancer(first: string, second: string): Promise<string> {
  const port = await freePort();
  const child = spawn('haproxy', ['-f', CONFIG], {
    env: { ...process.env, SANDBOXD_LB_BIND: `127.0.0.1:${port}`, SANDBOXD_REPLICA_1: first, SANDBOXD_REPLICA_2: second },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  balancers.push(child);
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    if (await fetch(`${url}/health`).then((res) => res.ok, () => false)) return url;
  }
  throw new Error('HAProxy did not answer');
}

const hostPort = (url: string) => new URL(url).host;

beforeAll(async () => {
  await admin.query(`CREATE DATABASE ${database}`);
});
afterAll(async () => {
  for (const child of balancers) child.kill('SIGKILL');
  for (const replica of replicas) await replica.stop();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('deploy/haproxy.cfg', () => {
  it('is a configuration HAProxy accepts (haproxy -c)', async () => {
    const { stdout } = await promisify(execFile)('haproxy', ['-c', '-f', CONFIG]);
    expect(stdout).toContain('Configuration file is valid');
  });

  it('spreads requests over two replicas of one database, streams events unbuffered, and sends nothing to a replica that stopped', async () => {
    const env = { SERVICE_DATABASE_URL: `${SERVER}/${database}` };
    replicas = [await startServer(dataDir(), ['--backend', 'fake', '--events', '--events-heartbeat', '1'], env)];
    replicas.push(await startServer(dataDir(), ['--backend', 'fake', '--events', '--events-heartbeat', '1'], env));
    const url = await balancer(hostPort(replicas[0]!.url), hostPort(replicas[1]!.url));

    const created = await fetch(`${url}/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'lb-one' }) });
    expect(created.status).toBe(201);
    // Each replica, asked directly, has it: the state is the database's.
    for (const replica of replicas) {
      const listed = (await (await fetch(`${replica.url}/sandboxes`)).json()) as { data: { name: string }[] };
      expect(listed.data.map((s) => s.name)).toEqual(['lb-one']);
    }
    // Requests through the balancer reach both replicas.
    for (let i = 0; i < 10; i++) expect((await fetch(`${url}/sandboxes/lb-one`)).status).toBe(200);
    const served = await Promise.all(
      replicas.map(async (replica) => {
        const metrics = await (await fetch(`${replica.url}/metrics`)).text();
        return [...metrics.matchAll(/^sandboxd_http_requests_total\{[^}]*route="\/sandboxes\/:name"[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
      }),
    );
    expect(served.every((count) => count > 0)).toBe(true);

    // GET /events through the balancer: the heartbeat comment arrives while the stream stays open.
    const events = await fetch(`${url}/events`, { headers: { accept: 'text/event-stream' } });
    expect(events.headers.get('content-type')).toContain('text/event-stream');
    const reader = events.body!.getReader();
    let text = '';
    while (!text.includes('\n:')) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();

    // One replica stops: every request goes to the other.
    await replicas[0]!.stop();
    for (let i = 0; i < 10; i++) expect((await fetch(`${url}/sandboxes/lb-one`)).status).toBe(200);
  });
});

describe('a terminal through deploy/haproxy.cfg', () => {
  let rt: DockerRuntime | undefined;
  afterAll(async () => {
    await rt?.dispose();
  });

  it('passes the WebSocket upgrade and its frames both ways', async () => {
    rt = await dockerRuntime();
    const url = await balancer(hostPort(rt.url), hostPort(rt.url));
    expect((await fetch(`${url}/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'lb-term' }) })).status).toBe(201);
    const ws = new WebSocket(`${url.replace('http', 'ws')}/sandboxes/lb-term/pty?cols=80&rows=24`);
    let output = '';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) output += data.toString('utf8');
    });
    await new Promise((done, fail) => ws.once('open', done).once('error', fail));
    ws.send(Buffer.from('echo through-$((40+2))\n'));
    for (const deadline = Date.now() + 15_000; !output.includes('through-42') && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
    expect(output).toContain('through-42');
    const closed = new Promise<number>((done) => ws.once('close', done));
    ws.send(Buffer.from('exit\n'));
    expect(await closed).toBe(1000);
  });
});
