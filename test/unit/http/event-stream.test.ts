import { connect } from 'node:net';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { tracesUrl } from '../../../src/telemetry/tracing.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let harness: FakeHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GET /events over a socket (fake backend)', () => {
  it('drops a client that stops reading, while a reading client gets every event and publishing never waits for a client', async () => {
    harness = await fakeHarness({}, undefined, { enabled: true, backlog: 10, webhookUrls: [] });
    const url = await harness.app.listen({ host: '127.0.0.1', port: 0 });
    const { bus, metrics } = harness.services.observability;

    // The slow client: a raw socket that sends its request and never reads a byte.
    const slow = connect(new URL(url).port as unknown as number, '127.0.0.1');
    slow.pause();
    slow.write('GET /events HTTP/1.1\r\nHost: x\r\n\r\n');
    const fast = new EventSource(`${url}/events`);
    const received: number[] = [];
    fast.addEventListener('sandbox.started', (e) => received.push(Number(e.lastEventId)));
    await new Promise((resolve) => (fast.onopen = resolve));
    while (bus.clients < 2) await sleep(5);

    const padding = 'x'.repeat(64 * 1024);
    const ids: number[] = [];
    for (let i = 0; i < 300; i++) {
      // publish is synchronous: it hands the event to each client's stream and returns, whatever
      // the clients read (its id is there before any client has read a byte).
      const published = bus.publish({ type: 'sandbox.started', timestamp: '', sandbox: 's', sandbox_uuid: 'u', labels: {}, metadata: { padding } });
      expect(typeof published.id).toBe('number');
      ids.push(published.id);
      // The reading client catches up every 10 events (640 KiB, under the 1 MiB it may fall
      // behind by): a sleep alone let it fall behind and be dropped too on a loaded machine.
      if (i % 10 === 0) while (received.length < ids.length) await sleep(1);
    }
    while (received.length < ids.length) await sleep(10);
    fast.close();
    slow.destroy();

    expect(received).toEqual(ids);
    expect((await metrics.registry.getSingleMetric('sandboxd_event_stream_clients_dropped_total')!.get()).values[0]!.value).toBe(1);
  });

  it('sends each event with `event` beside `type`; ?sandbox= leaves out events not about a sandbox, ?type= selects them', async () => {
    harness = await fakeHarness({}, undefined, { enabled: true, backlog: 10, webhookUrls: [] });
    const url = await harness.app.listen({ host: '127.0.0.1', port: 0 });
    const { bus } = harness.services.observability;
    const listen = async (query: string) => {
      const source = new EventSource(`${url}/events?${query}`);
      const got: { line: string; data: Record<string, unknown> }[] = [];
      for (const type of ['sandbox.started', 'snapshot.created']) {
        source.addEventListener(type, (e) => got.push({ line: e.type, data: JSON.parse(e.data) as Record<string, unknown> }));
      }
      await new Promise((resolve) => (source.onopen = resolve));
      return { got, source };
    };
    const bySandbox = await listen('sandbox=s');
    const byType = await listen('type=snapshot.created');
    while (bus.clients < 2) await sleep(5);

    const resource = { kind: 'store', id: 'store-1', name: 'orders' };
    bus.publish({ type: 'sandbox.started', timestamp: '', sandbox: 's', sandbox_uuid: 'u', labels: {}, metadata: {} });
    bus.publish({ type: 'snapshot.created', timestamp: '', sandbox: '', sandbox_uuid: '', resource, labels: {}, metadata: {} });
    bus.publish({ type: 'snapshot.created', timestamp: '', sandbox: 's', sandbox_uuid: 'u', labels: {}, metadata: {} });
    while (bySandbox.got.length < 2 || byType.got.length < 2) await sleep(5);
    bySandbox.source.close();
    byType.source.close();

    expect(bySandbox.got).toEqual([
      { line: 'sandbox.started', data: expect.objectContaining({ event: 'sandbox.started', type: 'sandbox.started', sandbox: 's' }) },
      { line: 'snapshot.created', data: expect.objectContaining({ event: 'snapshot.created', sandbox: 's' }) },
    ]);
    expect(byType.got.map((g) => g.data.resource ?? g.data.sandbox)).toEqual([resource, 's']);
    expect(byType.got[0]!.data).toMatchObject({ event: 'snapshot.created', sandbox: '', sandbox_uuid: '' });
  });

  it('sends heartbeat comments at the configured interval', async () => {
    harness = await fakeHarness({}, undefined, { enabled: true, backlog: 10, webhookUrls: [] });
    await harness.app.close();
    const { buildApp } = await import('../../../src/http/app.js');
    const { silentLogger } = await import('../../../src/telemetry/logger.js');
    const app = await buildApp({ services: harness.services, apiKeys: [], logger: silentLogger(), eventsHeartbeatMs: 50 });
    try {
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      const controller = new AbortController();
      const res = await fetch(`${url}/events`, { signal: controller.signal });
      const reader = res.body!.getReader();
      let text = '';
      const started = Date.now();
      while ((text.match(/: heartbeat/g) ?? []).length < 3) text += new TextDecoder().decode((await reader.read()).value);
      controller.abort();
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await app.close();
    }
  });
});

describe('tracesUrl', () => {
  it('appends /v1/traces to a collector base URL and keeps a full traces URL', () => {
    expect(tracesUrl('http://127.0.0.1:4318')).toBe('http://127.0.0.1:4318/v1/traces');
    expect(tracesUrl('http://collector:4318/otlp/')).toBe('http://collector:4318/otlp/v1/traces');
    expect(tracesUrl('https://collector/v1/traces')).toBe('https://collector/v1/traces');
  });
});
