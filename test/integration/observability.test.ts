import { execFile } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const KEY = 'observability-integration-key';
const SECRET = 'observability-webhook-secret';
const auth = { authorization: `Bearer ${KEY}` };
const run = promisify(execFile);

let rt: DockerRuntime | undefined;
let hooks: Receiver;
let otlp: Receiver;
const boxA = uniqueName('obs-a');
const boxB = uniqueName('obs-b');
const traceId = randomBytes(16).toString('hex');
const parentSpanId = randomBytes(8).toString('hex');
let envOutput = '';

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  call(rt!.url, method, path, body, { ...auth, ...headers });

interface Seen {
  id: string;
  type: string;
  data: any;
}

/** A real SSE client on GET /events; `headers` go on every (re)connection. */
function listen(query: string, headers: Record<string, string> = {}): { source: EventSource; seen: Seen[] } {
  const seen: Seen[] = [];
  const source = new EventSource(`${rt!.url}/events${query}`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...auth, ...headers } }),
  });
  for (const type of ['sandbox.created', 'sandbox.exec.completed', 'sandbox.deleted', 'sandbox.started', 'sandbox.stopped']) {
    source.addEventListener(type, (e) => seen.push({ id: e.lastEventId, type: e.type, data: JSON.parse(e.data) }));
  }
  return { source, seen };
}

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const opened = (source: EventSource) => new Promise<void>((resolve, reject) => {
  source.onopen = () => resolve();
  source.onerror = (e) => reject(new Error(`stream error ${e.code ?? ''} ${e.message ?? ''}`));
});

beforeAll(async () => {
  hooks = await startReceiver();
  otlp = await startReceiver();
  rt = await dockerRuntime({
    apiKeys: [KEY],
    webhookUrls: [`${hooks.url}/hook`],
    webhookSecret: SECRET,
    otelEndpoint: otlp.url,
    eventsHeartbeat: 0.2,
  });
  // A full pool: the sandboxes below are claimed from it, which the metrics count.
  await rt.services.pool.settled();
});
afterAll(async () => {
  await rt?.dispose();
  await hooks?.close();
  await otlp?.close();
});

describe('observability on real Docker', () => {
  it('streams events over SSE with the filter, resumes with Last-Event-ID, and delivers signed webhooks', async () => {
    const all = listen('');
    const onlyA = listen(`?sandbox=${boxA}`);
    await Promise.all([opened(all.source), opened(onlyA.source)]);

    expect((await api('POST', '/sandboxes', { name: boxA, labels: { team: 'obs' } })).status).toBe(201);
    const exec = await api('POST', `/sandboxes/${boxA}/exec`, { command: ['env'] }, { traceparent: `00-${traceId}-${parentSpanId}-01` });
    expect(exec.status).toBe(200);
    envOutput = exec.body.data.stdout;
    expect((await api('POST', '/sandboxes', { name: boxB })).status).toBe(201);
    expect((await api('DELETE', `/sandboxes/${boxB}`)).status).toBe(200);
    expect((await api('DELETE', `/sandboxes/${boxA}`)).status).toBe(200);

    await until('5 events on the unfiltered stream', () => all.seen.length >= 5);
    await until('3 events on the filtered stream', () => onlyA.seen.length >= 3);
    await new Promise((r) => setTimeout(r, 300));
    expect(onlyA.seen.map((s) => s.type)).toEqual(['sandbox.created', 'sandbox.exec.completed', 'sandbox.deleted']);
    expect(all.seen.map((s) => `${s.type} ${s.data.sandbox}`)).toEqual([
      `sandbox.created ${boxA}`,
      `sandbox.exec.completed ${boxA}`,
      `sandbox.created ${boxB}`,
      `sandbox.deleted ${boxB}`,
      `sandbox.deleted ${boxA}`,
    ]);
    for (const s of all.seen) expect(s.id).toBe(String(s.data.id));
    const [created, completed] = onlyA.seen;
    expect(created!.data).toMatchObject({ labels: { team: 'obs' }, metadata: { image: 'sandboxd/base:bookworm', backend: 'docker', vcpus: 1, memory_mb: 512 } });
    expect(completed!.data.metadata).toMatchObject({ command: 'env', success: true, exit_code: 0, duration_ms: expect.any(Number) });
    all.source.close();
    onlyA.source.close();

    // Resume after the first event: the rest come from the backlog.
    const resumed = listen(`?sandbox=${boxA}`, { 'last-event-id': created!.id });
    await until('the replayed events', () => resumed.seen.length >= 2);
    expect(resumed.seen.map((s) => s.id)).toEqual(onlyA.seen.slice(1).map((s) => s.id));
    resumed.source.close();

    // Every event reached the webhook once, with the same JSON and a valid signature.
    const deliveries = await hooks.waitFor(5);
    await new Promise((r) => setTimeout(r, 200));
    expect(deliveries).toHaveLength(5);
    expect(deliveries.map((d) => JSON.parse(d.body)).sort((x, y) => x.id - y.id)).toEqual(all.seen.map((s) => s.data));
    for (const d of deliveries) {
      expect(d.path).toBe('/hook');
      expect(d.headers['x-sandboxd-event']).toBe(JSON.parse(d.body).type);
      expect(d.headers['x-sandboxd-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(d.body).digest('hex')}`);
    }
  });

  it('frames events as id/event/data, sends heartbeats, and refuses a client without a key', async () => {
    expect((await fetch(`${rt!.url}/events`)).status).toBe(401);
    const refused = new EventSource(`${rt!.url}/events`);
    const error = await new Promise<{ code?: number | undefined }>((resolve) => (refused.onerror = resolve));
    refused.close();
    expect(error.code).toBe(401);

    const controller = new AbortController();
    const res = await fetch(`${rt!.url}/events`, { headers: { ...auth, 'last-event-id': '0' }, signal: controller.signal });
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes(': heartbeat')) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    expect(text).toMatch(/^id: \d+\nevent: sandbox\.created\ndata: \{"id":\d+,"type":"sandbox\.created",.*\}\n\n/m);
  });

  it('exports metrics that promtool accepts and that match the work done', async () => {
    await rt!.services.pool.settled();
    await rt!.services.runPool.settled();
    const res = await fetch(`${rt!.url}/metrics`, { headers: auth });
    expect(res.status).toBe(200);
    const text = await res.text();
    const child = run('promtool', ['check', 'metrics']);
    child.child.stdin!.end(text);
    const { stdout, stderr } = await child;
    expect(stdout + stderr).toBe('');

    const value = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    expect(value('sandboxd_sandbox_events_total{type="sandbox.created"}')).toBe(2);
    expect(value('sandboxd_sandbox_events_total{type="sandbox.deleted"}')).toBe(2);
    expect(value('sandboxd_sandbox_events_total{type="sandbox.exec.completed"}')).toBe(1);
    expect(value('sandboxd_sandbox_create_duration_seconds_count')).toBe(2);
    expect(value('sandboxd_commands_total{outcome="success"}')).toBe(1);
    expect(value('sandboxd_command_duration_seconds_count')).toBe(1);
    expect(value('sandboxd_sandboxes_active')).toBe(0);
    // The default pool size, refilled after the sandboxes above claimed from it.
    expect(value('sandboxd_warm_pool_size')).toBe(2);
    expect(value('sandboxd_webhook_deliveries_total{outcome="delivered"}')).toBe(5);
    expect(value('sandboxd_webhook_dropped_total')).toBe(0);
    expect(value('sandboxd_http_requests_total{method="POST",route="/sandboxes",status="201"}')).toBe(2);
    expect(value('sandboxd_http_requests_total{method="POST",route="/sandboxes/:name/exec",status="200"}')).toBe(1);
    expect(value('sandboxd_http_requests_total{method="DELETE",route="/sandboxes/:name",status="200"}')).toBe(2);
    expect(value('sandboxd_http_requests_total{method="GET",route="/events",status="401"}')).toBe(2);
    expect(value('sandboxd_http_request_duration_seconds_count{method="POST",route="/sandboxes/:name/exec",status="200"}')).toBe(1);
    // Both sandboxes claimed a pool instance: 2 creates warmed the pool and 2 refilled it; 2
    // more warmed the run pool (the reusable instances behind fast runs).
    expect(value('sandboxd_backend_operation_duration_seconds_count{operation="claim",outcome="ok"}')).toBe(2);
    expect(value('sandboxd_backend_operation_duration_seconds_count{operation="create",outcome="ok"}')).toBe(6);
    expect(value('sandboxd_backend_operation_duration_seconds_count{operation="exec",outcome="ok"}')).toBe(1);
    expect(text).toMatch(/^sandboxd_build_info\{version="[^"]+",node_version="v[\d.]+",backend="docker"\} 1$/m);
  });

  it('continues an incoming traceparent: spans exported over OTLP/HTTP and TRACEPARENT in the command', async () => {
    const traceparent = /^TRACEPARENT=00-([0-9a-f]{32})-([0-9a-f]{16})-01$/m.exec(envOutput);
    expect(traceparent?.[1]).toBe(traceId);
    expect(envOutput).toMatch(/^TRACESTATE=$/m);

    const t0 = Date.now(); await rt!.dispose(); console.log("DISPOSE", Date.now() - t0); // flushes the batched spans
    rt = undefined;
    const posts = otlp.received.filter((r) => r.path === '/v1/traces');
    expect(posts.length).toBeGreaterThan(0);
    const spans = posts.flatMap((p) =>
      JSON.parse(p.body).resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans)),
    ) as { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes: { key: string; value: any }[] }[];
    const attr = (span: (typeof spans)[number], key: string) => {
      const v = span.attributes.find((a) => a.key === key)?.value;
      return v?.stringValue ?? v?.intValue;
    };
    const server = spans.find((s) => s.name === 'POST /sandboxes/:name/exec')!;
    expect(server).toMatchObject({ traceId, parentSpanId });
    expect(attr(server, 'http.route')).toBe('/sandboxes/:name/exec');
    expect(Number(attr(server, 'http.response.status_code'))).toBe(200);
    const backendExec = spans.find((s) => s.name === 'backend.exec' && s.traceId === traceId)!;
    expect(backendExec.parentSpanId).toBe(server.spanId);
    // The command's parent is the backend.exec span of the same trace.
    expect(traceparent?.[2]).toBe(backendExec.spanId);
    expect(spans.some((s) => s.name === 'POST /sandboxes' && s.traceId !== traceId && !s.parentSpanId)).toBe(true);
  });
});
