import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { loadConfig } from '../../src/config/load-config.js';
import { startRuntime, type Runtime } from '../../src/runtime.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { call, uniqueName } from '../helpers/docker-runtime.js';

const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-detached-'));
/** Networks and chains of this file's own, removed at its end (a deployment's own would outlive it). */
const networkName = `tdet${Math.random().toString(36).slice(2, 8)}`;
let runtime: Runtime;
const start = async () => {
  const config = loadConfig({ env: {}, flags: { dataDir, port: 0, allowSudoExec: true, networkName } });
  runtime = await startRuntime(config, silentLogger(), { listen: true });
};
const api = (method: string, path: string, body?: unknown) => call(runtime.url!, method, path, body);

/** Polls a detached command until it leaves `running`. */
async function settled(name: string, id: string): Promise<any> {
  for (let i = 0; i < 100; i++) {
    const { body } = await api('GET', `/sandboxes/${name}/exec/detached/${id}`);
    if (body.data.status !== 'running') return body.data;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`detached command ${id} still runs`);
}

/** Command lines of every process in the sandbox, one per line (no ps needed). */
const PROCESSES = 'for p in /proc/[0-9]*/cmdline; do tr "\\0" " " < $p 2>/dev/null; echo; done';

const name = uniqueName('detached');
const other = uniqueName('detached-other');

beforeAll(async () => {
  await start();
  for (const sandbox of [name, other]) expect((await api('POST', '/sandboxes', { name: sandbox })).status).toBe(201);
});

afterAll(async () => {
  for (const sandbox of [name, other]) await api('DELETE', `/sandboxes/${sandbox}`);
  await runtime.close();
  await (runtime.backend as DockerBackend).egress.teardown();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('detached commands', () => {
  it('start, report status and logs, and end as completed or failed', async () => {
    const started = await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['sh', '-c', 'echo out; echo err >&2; exit 3'], env: { A: 'b' } });
    expect(started.status).toBe(200);
    expect(started.body.data).toMatchObject({ sandbox: name, command: ['sh', '-c', 'echo out; echo err >&2; exit 3'], status: 'running', exit_code: null });
    expect(started.body.data.pid).toBeGreaterThan(1);
    const { id } = started.body.data;
    expect(await settled(name, id)).toMatchObject({ id, status: 'failed', exit_code: 3 });
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${id}/logs`)).body.data).toMatchObject({ id, stream: 'stdout', content: 'out\n', offset: 0, next_offset: 4 });
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${id}/logs?stream=stderr`)).body.data.content).toBe('err\n');
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${id}/logs?stream=both`)).status).toBe(400);

    const ok = (await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['id', '-un'], sudo: true })).body.data;
    expect(await settled(name, ok.id)).toMatchObject({ status: 'completed', exit_code: 0 });
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${ok.id}/logs`)).body.data.content).toBe('root\n');
    const listed = (await api('GET', `/sandboxes/${name}/exec/detached`)).body.data.map((d: { id: string }) => d.id);
    expect(listed).toEqual([id, ok.id]);
  });

  it('scopes ids to their sandbox', async () => {
    const { id } = (await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['true'] })).body.data;
    const elsewhere = await api('GET', `/sandboxes/${other}/exec/detached/${id}`);
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.error).toContain(`detached command '${id}' not found in sandbox '${other}'`);
    expect((await api('DELETE', `/sandboxes/${other}/exec/detached/${id}`)).status).toBe(404);
    expect((await api('GET', `/sandboxes/${other}/exec/detached`)).body.data).toEqual([]);
    expect((await api('GET', `/sandboxes/no-such-sandbox/exec/detached`)).status).toBe(404);
  });

  it('keeps status, logs and kill working across a server restart, and kills the whole tree', async () => {
    const script = 'sleep 300 & echo started; wait';
    const { id } = (await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['sh', '-c', script] })).body.data;
    await new Promise((resolve) => setTimeout(resolve, 300));
    await runtime.close();
    await start();
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${id}`)).body.data).toMatchObject({ id, status: 'running' });
    expect((await api('GET', `/sandboxes/${name}/exec/detached/${id}/logs`)).body.data.content).toBe('started\n');
    const killed = await api('DELETE', `/sandboxes/${name}/exec/detached/${id}`);
    expect(killed.status).toBe(200);
    expect(killed.body.data).toMatchObject({ id, status: 'killed', exit_code: 137 });
    const left = (await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', PROCESSES + ' | grep -c "^sleep 300 " || true'] })).body.data;
    expect(left.output.trim()).toBe('0');
  });

  it('keeps ended commands and their logs across a stop and start; a running one is lost, a killed one killed', async () => {
    const kept = uniqueName('detached-kept');
    expect((await api('POST', '/sandboxes', { name: kept })).status).toBe(201);
    try {
      const done = (await api('POST', `/sandboxes/${kept}/exec/detach`, { command: ['sh', '-c', 'echo kept; echo e >&2; exit 2'] })).body.data;
      expect(await settled(kept, done.id)).toMatchObject({ status: 'failed', exit_code: 2 });
      const killed = (await api('POST', `/sandboxes/${kept}/exec/detach`, { command: ['sleep', '300'] })).body.data;
      expect((await api('DELETE', `/sandboxes/${kept}/exec/detached/${killed.id}`)).body.data).toMatchObject({ status: 'killed' });
      const running = (await api('POST', `/sandboxes/${kept}/exec/detach`, { command: ['sh', '-c', 'echo before-stop; sleep 300'] })).body.data;
      await expect.poll(async () => (await api('GET', `/sandboxes/${kept}/exec/detached/${running.id}/logs`)).body.data.content).toBe('before-stop\n');
      expect((await api('POST', `/sandboxes/${kept}/stop`)).status).toBe(200);
      expect((await api('POST', `/sandboxes/${kept}/start`)).status).toBe(200);
      const listed = (await api('GET', `/sandboxes/${kept}/exec/detached`)).body.data;
      expect(listed.map((d: any) => [d.id, d.status, d.exit_code])).toEqual([
        [done.id, 'failed', 2],
        [killed.id, 'killed', 137],
        [running.id, 'lost', null],
      ]);
      expect(listed.every((d: any) => typeof d.finished_at === 'string')).toBe(true);
      expect((await api('GET', `/sandboxes/${kept}/exec/detached/${done.id}/logs`)).body.data.content).toBe('kept\n');
      expect((await api('GET', `/sandboxes/${kept}/exec/detached/${done.id}/logs?stream=stderr`)).body.data.content).toBe('e\n');
      expect((await api('GET', `/sandboxes/${kept}/exec/detached/${running.id}/logs`)).body.data.content).toBe('before-stop\n');
    } finally {
      await api('DELETE', `/sandboxes/${kept}`);
    }
  });

  it('follows a log until the command ends, from an offset', async () => {
    const { id } = (await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['sh', '-c', 'echo one; sleep 1; echo two'] })).body.data;
    const response = await fetch(`${runtime.url}/sandboxes/${name}/exec/detached/${id}/logs?follow=true&offset=2`);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = (await response.text())
      .split('\n\n')
      .filter((block) => block.startsWith('id:'))
      .map((block) => ({ event: /event: (.*)/.exec(block)![1], data: JSON.parse(/data: (.*)/.exec(block)![1]!) }));
    const output = events.filter((e) => e.event === 'output').map((e) => e.data.data).join('');
    expect(output).toBe('e\ntwo\n');
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { status: 'completed', exit_code: 0, next_offset: 8 } });
  });

  it('refuses on a stopped sandbox, saying how to start it', async () => {
    const stopped = uniqueName('detached-stopped');
    await api('POST', '/sandboxes', { name: stopped });
    await api('POST', `/sandboxes/${stopped}/stop`);
    const refused = await api('POST', `/sandboxes/${stopped}/exec/detach`, { command: ['true'] });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain('start it with');
    await api('DELETE', `/sandboxes/${stopped}`);
  });
});
