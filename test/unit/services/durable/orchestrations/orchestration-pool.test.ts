import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../../../helpers/fake-app.js';
import { ActivityPool, type ActivityJob } from '../../../../../src/services/durable/orchestrations/activity-pool.js';

/**
 * The activity pool (`[orchestrations].concurrency`, default 16): attempts run as independent
 * promises, so long ones never hold up a short one while a slot is free, no more than the limit
 * run at once, and a freed slot goes to the instance with the fewest attempts running. Also the
 * orchestration.* events.
 */
let h: FakeHarness;
const started: string[] = [];

beforeEach(async () => {
  h = await fakeHarness();
  started.length = 0;
  // `sleep` hangs until aborted; anything else answers at once.
  h.backend.onExec = (request) => {
    started.push(request.command.join(' '));
    return request.command[0] === 'sleep' ? { hang: true } : { chunks: [{ stream: 'stdout', text: 'quick' }] };
  };
});
afterEach(() => h.close());

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let round = 0; round < 2000; round++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`never: ${what}`);
}

describe('the activity pool', () => {
  it('runs a short activity beside 8 long ones, and queues what exceeds the limit', async () => {
    const orchestrations = h.services.orchestrations;
    await orchestrations.definitions.save({ name: 'long', steps: [{ id: 'wait', type: 'activity', run: { command: ['sleep', '30'] } }] });
    await orchestrations.definitions.save({ name: 'short', steps: [{ id: 'go', type: 'activity', run: { command: ['echo', 'quick'] } }] });
    const long = [];
    for (let index = 0; index < 8; index++) long.push((await orchestrations.create({ name: 'long' })).instance.id);
    await until(() => orchestrations.inflight === 8, '8 long activities running');
    const short = (await orchestrations.create({ name: 'short' })).instance.id;
    await until(async () => (await orchestrations.get(short)).status === 'completed', 'the short one completed');
    expect((await Promise.all(long.map((id) => orchestrations.get(id)))).map((view) => view.status)).toEqual(Array(8).fill('running'));

    // Now 16 long ones fill the 16 default slots: a 17th waits, scheduled, until a slot frees.
    while (long.length < 16) long.push((await orchestrations.create({ name: 'long' })).instance.id);
    await until(() => orchestrations.inflight === 16, '16 running');
    const queued = (await orchestrations.create({ name: 'long' })).instance.id;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(orchestrations.inflight).toBe(16);
    expect((await orchestrations.get(queued)).steps[0]).toMatchObject({ status: 'scheduled' });
    await orchestrations.terminate(long[0]!);
    await until(async () => (await orchestrations.get(queued)).steps[0]?.status === 'running', 'the queued one took the freed slot');
    expect(started.filter((command) => command === 'sleep 30')).toHaveLength(17);
  });

  it("gives a freed slot to a waiting instance before the rest of another instance's map", async () => {
    const finish = new Map<string, () => void>();
    const order: string[] = [];
    const pool = new ActivityPool(2, (job, signal) => {
      const name = `${job.instance}:${job.command.step}`;
      order.push(name);
      return new Promise<void>((resolve) => {
        finish.set(name, resolve);
        signal.addEventListener('abort', () => resolve());
      });
    });
    const job = (instance: string, step: string) => ({ instance, command: { step, attempt: 1 } as ActivityJob['command'] });
    for (const step of ['0', '1', '2', '3']) pool.submit(job('map', step));
    pool.submit(job('short', 'go'));
    pool.submit(job('other', 'go'));
    expect(order).toEqual(['map:0', 'map:1']);
    finish.get('map:0')!();
    await until(() => order.length === 3, 'a freed slot taken');
    // FIFO would start map:2; the instances with nothing running come first, in arrival order.
    expect(order[2]).toBe('short:go');
    // The map has nothing running now either: a tie, and its attempt came first.
    finish.get('map:1')!();
    await until(() => order.length === 4, 'the next slot taken');
    expect(order[3]).toBe('map:2');
    // The map runs one, `other` none: `other` goes before map:3.
    finish.get('short:go')!();
    await until(() => order.length === 5, 'the last instance served');
    expect(order[4]).toBe('other:go');
    await pool.close();
  });

  it('publishes orchestration.started, .completed, .failed and .terminated with the resource', async () => {
    const events: { type: string; sandbox: string; resource?: { kind: string; id: string; name: string }; metadata: Record<string, unknown> }[] = [];
    h.services.observability.bus.subscribe(({ event }) => void events.push(event as never));
    const orchestrations = h.services.orchestrations;
    await orchestrations.definitions.save({ name: 'ok', steps: [{ id: 'x', type: 'set', value: 1 }] });
    await orchestrations.definitions.save({ name: 'bad', steps: [{ id: 'x', type: 'activity', run: { command: ['false'] }, retry_policy: { max_attempts: 1 } }] });
    await orchestrations.definitions.save({ name: 'wait', steps: [{ id: 'w', type: 'wait_for_event', event: 'go' }] });
    h.backend.onExec = () => ({ exit_code: 1 });
    const ok = (await orchestrations.create({ name: 'ok' })).instance.id;
    const bad = (await orchestrations.create({ name: 'bad' })).instance.id;
    const wait = (await orchestrations.create({ name: 'wait' })).instance.id;
    await until(async () => (await orchestrations.get(bad)).status === 'failed', 'bad failed');
    await orchestrations.terminate(wait, 'stop');
    const of = (id: string) => events.filter((event) => event.resource?.id === id).map((event) => event.type);
    expect(of(ok)).toEqual(['orchestration.started', 'orchestration.completed']);
    expect(of(bad)).toEqual(['orchestration.started', 'orchestration.failed']);
    expect(of(wait)).toEqual(['orchestration.started', 'orchestration.terminated']);
    const failed = events.find((event) => event.type === 'orchestration.failed')!;
    expect(failed).toMatchObject({ sandbox: '', resource: { kind: 'orchestration', id: bad, name: 'bad' }, metadata: { failed_step: 'x', error: expect.stringMatching(/^exit code 1/) } });
  });
});
