import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeBackend } from '../../../../../src/backends/fake/fake-backend.js';
import { defaultConfig } from '../../../../../src/config/config-schema.js';
import { Services } from '../../../../../src/services/services.js';
import { openStore, type Store } from '../../../../../src/state/store.js';
import { silentLogger } from '../../../../../src/telemetry/logger.js';
import { manualClock } from '../../../../helpers/manual-clock.js';

/**
 * Restart safety at the service level: the services are closed in the
 * middle of an activity (its task row stays `running`, as after a kill -9) and opened again
 * on the same data directory; the instance completes without re-running completed steps.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const time = manualClock();

async function open(dataDir: string, ran: string[], hang: (command: string) => boolean): Promise<{ services: Services; store: Store; close(): Promise<void> }> {
  const store = await openStore(dataDir);
  const backend = new FakeBackend();
  backend.onExec = (request) => {
    const command = request.command.join(' ');
    ran.push(command);
    return hang(command) ? { hang: true } : { chunks: [{ stream: 'stdout', text: `${command}\n` }] };
  };
  const services = new Services({
    config: defaultConfig({ dataDir: store.dataDir, poolSize: 0 }),
    store,
    backend,
    logger: silentLogger(),
    clock: time.clock,
  });
  return {
    services,
    store,
    async close() {
      await services.close();
      await store.close();
    },
  };
}

async function until(services: Services, id: string, done: (view: Awaited<ReturnType<Services['orchestrations']['get']>>) => boolean) {
  for (let round = 0; round < 2000; round++) {
    const view = await services.orchestrations.get(id);
    if (done(view)) return view;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`orchestration ${id} never got there: ${JSON.stringify((await services.orchestrations.get(id)).steps)}`);
}

const THREE = {
  name: 'three',
  steps: ['one', 'two', 'three'].map((id) => ({ id, type: 'activity', run: { command: ['step', id] } })),
};

describe('orchestrations across a restart', () => {
  it('an activity cut by the stop becomes a new attempt; completed steps never run again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-orch-restart-'));
    dirs.push(dataDir);
    const before: string[] = [];
    const first = await open(dataDir, before, (command) => command === 'step two');
    await first.services.orchestrations.definitions.save(THREE);
    const { instance } = await first.services.orchestrations.create({ name: 'three' });
    await until(first.services, instance.id, (view) => view.steps.some((step) => step.id === 'two' && step.status === 'running'));
    await first.close();
    expect(before).toEqual(['step one', 'step two']);

    const after: string[] = [];
    const second = await open(dataDir, after, () => false);
    await second.services.orchestrations.recover();
    const done = await until(second.services, instance.id, (view) => view.status === 'completed');
    await second.close();
    expect(after).toEqual(['step two', 'step three']);
    expect(done.output).toBe('step three\n');
    const two = done.history!.filter((event) => event.step === 'two').map((event) => `${event.type}:${(event.data as { error?: string }).error ?? ''}`);
    expect(two).toEqual([
      'ActivityScheduled:',
      'ActivityStarted:',
      'ActivityFailed:interrupted by server restart',
      'ActivityScheduled:',
      'ActivityStarted:',
      'ActivityCompleted:',
    ]);
  });

  it('fails the step instead when retry_on_interrupt is false', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-orch-restart-'));
    dirs.push(dataDir);
    const first = await open(dataDir, [], () => true);
    await first.services.orchestrations.definitions.save({
      name: 'once',
      steps: [{ id: 'deploy', type: 'activity', retry_on_interrupt: false, run: { command: ['deploy'] } }],
    });
    const { instance } = await first.services.orchestrations.create({ name: 'once' });
    await until(first.services, instance.id, (view) => view.steps[0]?.status === 'running');
    await first.close();

    const ran: string[] = [];
    const second = await open(dataDir, ran, () => false);
    await second.services.orchestrations.recover();
    const done = await second.services.orchestrations.get(instance.id);
    await second.close();
    expect(ran).toEqual([]);
    expect(done).toMatchObject({ status: 'failed', failed_step: 'deploy', error: expect.stringMatching(/interrupted by server restart/) });
  });

  it('re-arms timers from their rows: an overdue timer fires at the first tick, a raised event is kept', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-orch-restart-'));
    dirs.push(dataDir);
    const first = await open(dataDir, [], () => false);
    await first.services.orchestrations.definitions.save({
      name: 'later',
      steps: [
        { id: 'pause', type: 'timer', duration: '1h' },
        { id: 'go', type: 'wait_for_event', event: 'go' },
      ],
    });
    const { instance } = await first.services.orchestrations.create({ name: 'later' });
    await first.services.orchestrations.raiseEvent(instance.id, 'go', { ready: true });
    await first.close();

    time.advance(2 * 3600);
    const second = await open(dataDir, [], () => false);
    await second.services.orchestrations.recover();
    await second.services.timers.start();
    const done = await until(second.services, instance.id, (view) => view.status === 'completed');
    await second.close();
    expect(done.output).toEqual({ ready: true });
  });
});
