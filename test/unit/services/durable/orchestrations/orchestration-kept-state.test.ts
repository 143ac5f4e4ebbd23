import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeBackend } from '../../../../../src/backends/fake/fake-backend.js';
import { defaultConfig } from '../../../../../src/config/config-schema.js';
import { Services } from '../../../../../src/services/services.js';
import { OrchestrationRepository } from '../../../../../src/state/orchestration-repository.js';
import { openStore, type Store } from '../../../../../src/state/store.js';
import { silentLogger } from '../../../../../src/telemetry/logger.js';

/**
 * Derived state kept between decisions: an instance's decisions read its history once, then
 * advance the state they kept; a history that another writer (a replica) extended is read again.
 */
let dataDir: string | undefined;
let store: Store | undefined;
let services: Services | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await services?.close();
  await store?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('orchestration decisions from kept state', () => {
  it('read the history once for many decisions, and again when another writer extended it', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-orch-kept-'));
    store = await openStore(dataDir);
    services = new Services({ config: defaultConfig({ dataDir, poolSize: 0 }), store, backend: new FakeBackend(), logger: silentLogger() });
    const orchestrations = services.orchestrations;
    await orchestrations.definitions.save({ name: 'waits', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }, { id: 'v', type: 'set', value: '${steps.w.output}' }] });
    const { instance } = await orchestrations.create({ name: 'waits' });
    const reads = vi.spyOn(OrchestrationRepository.prototype, 'history');
    for (let index = 0; index < 50; index++) await orchestrations.raiseEvent(instance.id, 'noise', index);
    expect(reads).toHaveBeenCalledTimes(1);

    // Another writer appends an event: the kept state no longer ends where the history does.
    const repo = orchestrations['repo'];
    const last = await repo.lastSequence(instance.id);
    const stamp = new Date().toISOString();
    await repo.commit(instance.id, [{ sequence: last + 1, type: 'EventRaised', step: null, data: { name: 'elsewhere', data: 1 }, timestamp: stamp }], { status: 'waiting', tasks: [], timers: [], updated_at: stamp, fields: {} });
    // Decided from the stale state, the next event would take the sequence the other writer took.
    expect(await orchestrations.raiseEvent(instance.id, 'go', 'here')).toMatchObject({ sequence: last + 2 });
    expect(reads).toHaveBeenCalledTimes(2);
    const view = await orchestrations.get(instance.id);
    expect(view).toMatchObject({ status: 'completed', output: 'here' });
    expect(view.history!.filter((event) => event.type === 'EventRaised').map((event) => (event.data as { name: string }).name).slice(-2)).toEqual(['elsewhere', 'go']);
  });

  it('decide a decision that starts over (the history limit) from the whole history, and keep no state from it', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-orch-kept-'));
    store = await openStore(dataDir);
    services = new Services({
      config: { ...defaultConfig({ dataDir, poolSize: 0 }), orchestrationMaxHistoryEvents: 12 },
      store,
      backend: new FakeBackend(),
      logger: silentLogger(),
    });
    const orchestrations = services.orchestrations;
    await orchestrations.definitions.save({ name: 'waits', steps: [{ id: 'w', type: 'wait_for_event', event: 'never' }] });
    const { instance } = await orchestrations.create({ name: 'waits' });
    const reads = vi.spyOn(OrchestrationRepository.prototype, 'history');
    let refused: unknown;
    for (let index = 0; index < 20 && !refused; index++) await orchestrations.raiseEvent(instance.id, 'noise', index).catch((err: unknown) => (refused = err));
    expect(refused).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('reached its history limit of 12 events') });
    const view = await orchestrations.get(instance.id);
    expect(view).toMatchObject({ status: 'failed', error: 'history limit reached: more than 12 events (--orchestration-max-history-events)' });
    expect(view.history).toHaveLength(12);
    // Once to keep the state, once for the decision that started over (and once for the view).
    expect(reads).toHaveBeenCalledTimes(3);
  });
});
