import { createHmac } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EventBus, type PublishedEvent } from '../../../../src/services/events/event-bus.js';
import { WebhookDispatcher, type WebhookOptions } from '../../../../src/services/events/webhook-dispatcher.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';
import { Metrics } from '../../../../src/telemetry/metrics.js';
import { startReceiver, type Receiver } from '../../../helpers/receiver.js';

const SECRET = 'webhook-secret-for-tests';

/** Real events, numbered by a real bus. */
function events(count: number): PublishedEvent[] {
  const bus = new EventBus({ enabled: true, backlog: 10, logger: silentLogger() });
  const out: PublishedEvent[] = [];
  bus.subscribe((p) => out.push(p));
  for (let i = 0; i < count; i++) {
    bus.publish({
      type: 'sandbox.exec.completed',
      timestamp: new Date().toISOString(),
      sandbox: `box-${i}`,
      sandbox_uuid: `uuid-${i}`,
      labels: { team: 'a' },
      metadata: { command: 'true', exit_code: 0, success: true, duration_ms: 3 },
    });
  }
  return out;
}

let dispatcher: WebhookDispatcher | undefined;
let metrics: Metrics;
const receivers: Receiver[] = [];

function dispatch(urls: string[], options: Partial<WebhookOptions> = {}): WebhookDispatcher {
  metrics = new Metrics(
    { activeSandboxes: async () => 0, activeObjects: async () => 0, warmPoolSize: () => 0, eventClients: () => 0, webhookQueue: () => dispatcher!.stats() },
    { version: 'test', backend: 'fake' },
  );
  dispatcher = new WebhookDispatcher({ urls, secret: SECRET, metrics, logger: silentLogger(), retryBaseMs: 50, ...options });
  return dispatcher;
}

async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

const counter = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until nothing is queued or in flight. */
async function settled(): Promise<void> {
  while (dispatcher!.stats().queued + dispatcher!.stats().inFlight > 0) await sleep(5);
}

afterEach(async () => {
  await dispatcher?.close(0);
  dispatcher = undefined;
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

describe('WebhookDispatcher (real HTTP receivers on 127.0.0.1)', () => {
  it('POSTs every event to every URL with its JSON body, headers and a signature that verifies', async () => {
    const [a, b] = [await receiver(), await receiver()];
    const sent = events(5);
    const d = dispatch([a.url, b.url]);
    for (const p of sent) d.enqueue(p);
    for (const r of [a, b]) {
      const got = await r.waitFor(5);
      expect(got.map((g) => JSON.parse(g.body)).sort((x, y) => x.id - y.id)).toEqual(sent.map((p) => p.event));
      for (const g of got) {
        expect(g.method).toBe('POST');
        expect(g.headers['content-type']).toBe('application/json');
        expect(g.headers['x-sandboxd-event']).toBe('sandbox.exec.completed');
        expect(g.headers['x-sandboxd-delivery']).toMatch(/^[0-9a-f-]{36}$/);
        const expected = `sha256=${createHmac('sha256', SECRET).update(g.body).digest('hex')}`;
        expect(g.headers['x-sandboxd-signature']).toBe(expected);
      }
    }
    await settled();
    expect(await counter('sandboxd_webhook_deliveries_total')).toEqual([{ labels: { outcome: 'delivered' }, value: 10 }]);
  });

  it('delivers `event` beside `type`, and `resource` for an event not about a sandbox', async () => {
    const r = await receiver();
    const bus = new EventBus({ enabled: true, backlog: 10, logger: silentLogger() });
    const d = dispatch([r.url]);
    bus.subscribe((p) => d.enqueue(p));
    const resource = { kind: 'schedule', id: '0198c4a0-0000-7000-8000-000000000002', name: 'nightly' };
    bus.publish({ type: 'sandbox.created', timestamp: '', sandbox: 'box', sandbox_uuid: 'u', labels: {}, metadata: {} });
    bus.publish({ type: 'snapshot.deleted', timestamp: '', sandbox: '', sandbox_uuid: '', resource, labels: {}, metadata: {} });
    const got = (await r.waitFor(2)).map((g) => ({ header: g.headers['x-sandboxd-event'], body: JSON.parse(g.body) }));
    got.sort((x, y) => x.body.id - y.body.id);
    expect(got).toEqual([
      { header: 'sandbox.created', body: expect.objectContaining({ event: 'sandbox.created', type: 'sandbox.created', sandbox: 'box' }) },
      { header: 'snapshot.deleted', body: expect.objectContaining({ event: 'snapshot.deleted', type: 'snapshot.deleted', sandbox: '', sandbox_uuid: '', resource }) },
    ]);
    expect(got[0]!.body).not.toHaveProperty('resource');
  });

  it('retries a receiver that fails twice, with the same delivery id and growing delays, then stops', async () => {
    const r = await receiver((i) => (i < 2 ? 503 : 200));
    const started = Date.now();
    dispatch([r.url]).enqueue(events(1)[0]!);
    const got = await r.waitFor(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(50 + 100);
    await sleep(400); // a fourth POST would come 200 ms after the third
    expect(r.received).toHaveLength(3);
    expect(new Set(got.map((g) => g.headers['x-sandboxd-delivery'])).size).toBe(1);
    expect(new Set(got.map((g) => g.body)).size).toBe(1);
    await settled();
    expect(await counter('sandboxd_webhook_attempts_total')).toEqual(
      expect.arrayContaining([
        { labels: { result: 'http_error' }, value: 2 },
        { labels: { result: 'ok' }, value: 1 },
      ]),
    );
  });

  it('costs an unreachable receiver at most 3 retries, then counts the delivery failed', async () => {
    // A port that was free a moment ago: connections are refused.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    dispatch([`http://127.0.0.1:${port}/hook`]).enqueue(events(1)[0]!);
    await sleep(50 + 100 + 200 + 600);
    expect(await counter('sandboxd_webhook_attempts_total')).toEqual([{ labels: { result: 'network_error' }, value: 4 }]);
    expect(await counter('sandboxd_webhook_deliveries_total')).toEqual([{ labels: { outcome: 'failed' }, value: 1 }]);
    expect(dispatcher!.stats()).toEqual({ queued: 0, inFlight: 0 });
  });

  it('gives up an attempt that gets no answer in time', async () => {
    const r = await receiver(() => 200, 1000);
    dispatch([r.url], { timeoutMs: 100, retries: 1 }).enqueue(events(1)[0]!);
    await r.waitFor(2);
    await settled();
    expect(await counter('sandboxd_webhook_deliveries_total')).toEqual([{ labels: { outcome: 'failed' }, value: 1 }]);
  });

  it('keeps at most 64 POSTs in flight with 200 events for a slow receiver, and delivers them all', async () => {
    const r = await receiver(() => 200, 150);
    const d = dispatch([r.url]);
    // Enqueueing never waits for the receiver: it returns nothing to await.
    for (const p of events(200)) expect(d.enqueue(p)).toBeUndefined();
    await r.waitFor(200);
    expect(r.maxInFlight()).toBe(64);
    expect(new Set(r.received.map((g) => JSON.parse(g.body).id)).size).toBe(200);
  });

  it('lets deliveries under way finish at close, then takes no more events', async () => {
    const r = await receiver(() => 200, 100);
    const d = dispatch([r.url]);
    for (const p of events(3)) d.enqueue(p);
    await d.close();
    expect(r.received).toHaveLength(3);
    d.enqueue(events(1)[0]!);
    expect(d.stats()).toEqual({ queued: 0, inFlight: 0 });
  });

  it('drops deliveries past the queue bound and counts them', async () => {
    const r = await receiver(() => 200, 200);
    const d = dispatch([r.url], { maxInFlight: 2, maxQueued: 5 });
    for (const p of events(10)) d.enqueue(p);
    // 2 in flight at once, 5 waiting, 3 dropped.
    expect(d.stats()).toEqual({ queued: 5, inFlight: 2 });
    expect(await counter('sandboxd_webhook_dropped_total')).toEqual([{ labels: {}, value: 3 }]);
    await r.waitFor(7);
  });
});
