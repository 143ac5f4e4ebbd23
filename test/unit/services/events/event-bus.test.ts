import { afterEach, describe, expect, it } from 'vitest';
import { EventBus, type PublishedEvent, type SandboxEvent } from '../../../../src/services/events/event-bus.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

const publishOne = (bus: EventBus, sandbox = 'a') =>
  bus.publish({ type: 'sandbox.started', timestamp: new Date().toISOString(), sandbox, sandbox_uuid: 'u', labels: {}, metadata: {} });

describe('EventBus', () => {
  it('numbers events consecutively from a start time, so ids keep growing across restarts', () => {
    const before = Date.now() * 1000;
    const bus = new EventBus({ enabled: true, backlog: 10, logger: silentLogger() });
    const ids = [publishOne(bus).id, publishOne(bus).id, publishOne(bus).id];
    expect(ids[0]).toBeGreaterThanOrEqual(before);
    expect(ids).toEqual([ids[0], ids[0]! + 1, ids[0]! + 2]);
    expect(Number.isSafeInteger(ids[2])).toBe(true);
    expect(bus.lastId).toBe(ids[2]);
  });

  it('replays from a bounded backlog and says when events were lost', () => {
    const bus = new EventBus({ enabled: true, backlog: 5, logger: silentLogger() });
    const ids = Array.from({ length: 12 }, () => publishOne(bus).id);
    expect(bus.since(ids[9]!)).toMatchObject({ gap: false, events: [{ event: { id: ids[10] } }, { event: { id: ids[11] } }] });
    expect(bus.since(ids[6]!).events.map((p) => p.event.id)).toEqual(ids.slice(7));
    const old = bus.since(ids[2]!);
    expect(old.gap).toBe(true);
    expect(old.events.map((p) => p.event.id)).toEqual(ids.slice(7));
    expect(bus.since(ids[11]!)).toEqual({ events: [], gap: false });
    // An id from before this process started: everything kept, and a gap.
    expect(bus.since(1)).toMatchObject({ gap: true });
  });

  it('keeps no backlog when off, while listeners (metrics) still hear every event', () => {
    const bus = new EventBus({ enabled: false, backlog: 5, logger: silentLogger() });
    const heard: number[] = [];
    bus.subscribe((p) => heard.push(p.event.id));
    const id = publishOne(bus).id;
    expect(heard).toEqual([id]);
    expect(bus.since(0).events).toEqual([]);
  });

  it('gives every event its kind as `event` beside `type`, in the object and in its JSON', () => {
    const bus = new EventBus({ enabled: true, backlog: 5, logger: silentLogger() });
    const heard: PublishedEvent[] = [];
    bus.subscribe((p) => heard.push(p));
    const event = publishOne(bus);
    expect(event).toMatchObject({ event: 'sandbox.started', type: 'sandbox.started', sandbox: 'a' });
    expect(JSON.parse(heard[0]!.json)).toEqual(event);
    expect(Object.keys(JSON.parse(heard[0]!.json)).slice(0, 3)).toEqual(['id', 'type', 'event']);
    expect(event.resource).toBeUndefined();
  });

  it('carries `resource` on events not about a sandbox: a sandbox filter leaves them out, a type filter selects them', () => {
    const bus = new EventBus({ enabled: true, backlog: 10, logger: silentLogger() });
    const resource = { kind: 'store', id: '0198c4a0-0000-7000-8000-000000000001', name: 'orders' };
    const first = publishOne(bus, 'a').id;
    const about = bus.publish({ type: 'snapshot.created', timestamp: '', sandbox: '', sandbox_uuid: '', resource, labels: {}, metadata: {} });
    publishOne(bus, 'b');
    expect(about).toMatchObject({ event: 'snapshot.created', sandbox: '', sandbox_uuid: '', resource });

    const seen = (filter: Parameters<EventBus['follow']>[0]) => {
      const out: SandboxEvent[] = [];
      bus.follow(filter, first - 1, (p) => out.push(JSON.parse(p.json) as SandboxEvent))();
      return out;
    };
    expect(seen({ sandbox: 'a' }).map((e) => e.sandbox)).toEqual(['a']);
    expect(seen({ sandbox: 'b', types: new Set(['sandbox.started', 'snapshot.created']) }).map((e) => e.sandbox)).toEqual(['b']);
    expect(seen({ types: new Set(['snapshot.created']) })).toEqual([about]);
    expect(seen({}).map((e) => e.resource?.name ?? e.sandbox)).toEqual(['a', 'orders', 'b']);
  });

  it('isolates a failing listener and counts stream clients', () => {
    const bus = new EventBus({ enabled: true, backlog: 5, logger: silentLogger() });
    const heard: string[] = [];
    bus.subscribe(() => {
      throw new Error('broken listener');
    });
    const unsubscribe = bus.subscribe((p) => heard.push(p.event.sandbox), { client: true });
    expect(bus.clients).toBe(1);
    publishOne(bus, 'x');
    unsubscribe();
    unsubscribe();
    expect(bus.clients).toBe(0);
    expect(heard).toEqual(['x']);
  });
});

describe('events from the service layer (fake backend)', () => {
  let harness: FakeHarness | undefined;
  afterEach(async () => harness?.close());

  it('publishes created, exec.completed, stopped, started and deleted with labels and metadata', async () => {
    harness = await fakeHarness({}, undefined, { enabled: true, backlog: 100, webhookUrls: [] });
    const seen: SandboxEvent[] = [];
    harness.services.observability.bus.subscribe((p) => seen.push(p.event));
    const { sandboxes, exec } = harness.services;
    await sandboxes.create({ name: 'ev', labels: { team: 'blue' }, vcpus: 1, memory_mb: 256 });
    await exec.exec('ev', { command: ['sh', '-c', "echo 'it''s'"] });
    harness.backend.onExec = () => ({ exit_code: 3 });
    await exec.exec('ev', { command: ['false'] });
    await sandboxes.stop('ev');
    await sandboxes.start('ev');
    await sandboxes.remove('ev');
    expect(seen.map((e) => e.type)).toEqual([
      'sandbox.created',
      'sandbox.exec.completed',
      'sandbox.exec.completed',
      'sandbox.stopped',
      'sandbox.started',
      'sandbox.deleted',
    ]);
    for (const e of seen) expect(e).toMatchObject({ sandbox: 'ev', labels: { team: 'blue' } });
    expect(seen[0]!.metadata).toMatchObject({ image: 'sandboxd/base:bookworm', backend: 'fake', vcpus: 1, memory_mb: 256 });
    expect(seen[0]!.metadata.duration_ms).toEqual(expect.any(Number));
    expect(seen[1]!.metadata).toMatchObject({ command: `sh -c 'echo '\\''it'\\'''\\''s'\\'''`, success: true, exit_code: 0 });
    expect(seen[2]!.metadata).toMatchObject({ command: 'false', success: false, exit_code: 3 });
    expect(seen.map((e) => e.id)).toEqual(seen.map((_, i) => seen[0]!.id + i));
  });

  it('publishes the lifecycle and snapshot transitions too', async () => {
    harness = await fakeHarness({}, undefined, { enabled: true, backlog: 100, webhookUrls: [] });
    const seen: SandboxEvent[] = [];
    harness.services.observability.bus.subscribe((p) => seen.push(p.event));
    const { sandboxes, lifecycle, snapshots } = harness.services;
    await sandboxes.create({ name: 'lc', labels: { team: 'red' }, ttl: '1h' });
    await lifecycle.resize('lc', { memory_mb: 256 });
    await lifecycle.extend('lc', '30m');
    await snapshots.create({ sandbox: 'lc', name: 'snap' });
    await snapshots.restore('snap', 'lc-copy');
    await snapshots.delete('snap');
    await lifecycle.archive('lc', 'test');
    await lifecycle.recover('lc');
    expect(seen.map((e) => [e.type, e.sandbox])).toEqual([
      ['sandbox.created', 'lc'],
      ['sandbox.resized', 'lc'],
      ['sandbox.extended', 'lc'],
      ['snapshot.created', 'lc'],
      ['sandbox.created', 'lc-copy'],
      ['snapshot.restored', 'lc-copy'],
      ['snapshot.deleted', 'lc'],
      ['sandbox.archived', 'lc'],
      ['sandbox.recovered', 'lc'],
    ]);
    expect(seen.find((e) => e.type === 'sandbox.archived')).toMatchObject({ labels: { team: 'red' }, metadata: { reason: 'test' } });
    expect(seen.find((e) => e.type === 'sandbox.extended')!.metadata).toMatchObject({ by: '30m' });
  });
});
