import { describe, expect, it } from 'vitest';
import type { ExecRequest } from '../../../src/backends/backend.js';
import { FakeBackend } from '../../../src/backends/fake/fake-backend.js';
import { instrumentBackend } from '../../../src/backends/instrumented-backend.js';
import { capabilityNames } from '../../../src/backends/backend.js';
import { Metrics } from '../../../src/telemetry/metrics.js';
import { Tracing } from '../../../src/telemetry/tracing.js';

const metrics = () =>
  new Metrics(
    { activeSandboxes: async () => 0, activeObjects: async () => 0, warmPoolSize: () => 0, eventClients: () => 0, webhookQueue: () => ({ queued: 0, inFlight: 0 }) },
    { version: 'test', backend: 'fake' },
  );

const spec = { name: 'ib', uuid: 'u-ib', image: 'sandboxd/base:bookworm', vcpus: 1, memory_mb: 256, profile: 'moderate' as const, env: {} };

describe('instrumentBackend', () => {
  it('times operations by outcome and leaves other members untouched', async () => {
    const fake = new FakeBackend();
    const m = metrics();
    const backend = instrumentBackend(fake, m);
    expect(backend.name).toBe('fake');
    expect(backend.runtimes()).toEqual(fake.runtimes()); // synchronous, still synchronous
    expect(capabilityNames(backend)).toEqual(capabilityNames(fake));
    const state = await backend.create(spec);
    fake.failNext('stop', new Error('engine hiccup'));
    await expect(backend.stop(state.id)).rejects.toThrow('engine hiccup');
    const values = (await m.backendDuration.get()).values.filter((v) => v.metricName?.endsWith('_count'));
    expect(values.map((v) => [v.labels.operation, v.labels.outcome, v.value])).toEqual(
      expect.arrayContaining([
        ['create', 'ok', 1],
        ['stop', 'error', 1],
      ]),
    );
  });

  it('observes the operations of every capability, and follows what the backend declares now', async () => {
    const fake = new FakeBackend({ capabilities: ['snapshots', 'detached'] });
    const m = metrics();
    const backend = instrumentBackend(fake, m);
    const { id } = await backend.create(spec);
    await backend.capabilities.snapshots!.snapshot(id, 'img:1', 'snapshot');
    expect(await backend.capabilities.snapshots!.listImages()).toEqual(['img:1']);
    fake.failNext('startDetached', new Error('agent hiccup'));
    await expect(backend.capabilities.detached!.startDetached(id, { command: ['true'] })).rejects.toThrow('agent hiccup');
    expect(backend.capabilities.resize).toBeUndefined();
    fake.declare('resize');
    await backend.capabilities.resize!.resize(id, { vcpus: 2 });
    fake.omit('snapshots');
    expect(backend.capabilities.snapshots).toBeUndefined();
    fake.declare('workers');
    await backend.capabilities.workers!.ensureWorker(id, 'k', { command: ['w'] });
    await backend.capabilities.workers!.callWorker(id, 'k', { nonce: 'n', line: 'x', timeout_ms: 1000 });
    const values = (await m.backendDuration.get()).values.filter((v) => v.metricName?.endsWith('_count'));
    expect(values.map((v) => [v.labels.operation, v.labels.outcome, v.value])).toEqual(
      expect.arrayContaining([
        ['snapshot', 'ok', 1],
        ['listImages', 'ok', 1],
        ['startDetached', 'error', 1],
        ['resize', 'ok', 1],
        ['ensureWorker', 'ok', 1],
        ['callWorker', 'ok', 1],
      ]),
    );
  });

  it('gives commands TRACEPARENT and TRACESTATE of their span; an explicit value wins', async () => {
    const fake = new FakeBackend();
    const seen: ExecRequest[] = [];
    fake.onExec = (request) => {
      seen.push(request);
      return {};
    };
    const tracing = new Tracing({ endpoint: 'http://127.0.0.1:9', version: 'test' });
    const backend = instrumentBackend(fake, metrics(), tracing);
    const { id } = await backend.create(spec);
    const parent = tracing.extract({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=x' });
    await tracing.runWith(parent, () => backend.exec(id, { command: ['env'], timeout_ms: 1000, env: { A: '1' } }));
    await backend.exec(id, { command: ['env'], timeout_ms: 1000, env: { TRACEPARENT: 'mine' } });
    expect(seen[0]!.env).toMatchObject({ A: '1', TRACESTATE: 'vendor=x' });
    expect(seen[0]!.env!.TRACEPARENT).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-(?!b7ad6b7169203331)[0-9a-f]{16}-01$/);
    expect(seen[1]!.env!.TRACEPARENT).toBe('mine');
  });
});
