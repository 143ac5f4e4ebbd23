import { afterEach, describe, expect, it } from 'vitest';
import { conflict } from '../../../../src/errors.js';
import { MAX_RUNS_PER_INSTANCE } from '../../../../src/services/pools/index.js';
import { IDLE_INSTANCE_MB } from '../../../../src/services/pools/keyed-pool.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { manualClock } from '../../../helpers/manual-clock.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const BASE = 'sandboxd/base:bookworm';
const KEY = { image: BASE, profile: 'moderate' } as const;

/** Run instances the fake backend holds. */
const runners = (harness: FakeHarness) => [...harness.backend.instances.values()].filter((i) => i.spec.reusable);

async function reusing(settings: Parameters<typeof fakeHarness>[0] = {}, clock?: Parameters<typeof fakeHarness>[1]): Promise<FakeHarness> {
  const harness = await fakeHarness({ poolSize: 2, ...settings }, clock);
  harness.backend.declare('reuse');
  harness.services.runPool.warm();
  await harness.services.runPool.settled();
  return harness;
}

/** A fast run; the name of the instance it ran in. */
async function fastRun(harness: FakeHarness, command = ['true']): Promise<string> {
  let name = '';
  await harness.services.runs.run({ command }, { onStarted: (started) => (name = started) });
  return name;
}

describe('fast runs on a backend that can reset an instance', () => {
  it('reuse one instance after its reset instead of destroying it', async () => {
    h = await reusing();
    expect(runners(h)).toHaveLength(2);
    const first = await fastRun(h);
    await h.services.runPool.settled();
    const second = await fastRun(h);
    await h.services.runPool.settled();
    expect(first).toMatch(/^runner-[0-9a-f]{12}$/);
    expect(second).toBe(first);
    expect(h.backend.calls.filter((c) => c.op === 'reset')).toHaveLength(2);
    expect(h.backend.calls.filter((c) => c.op === 'remove')).toHaveLength(0);
    // The claim pool is not touched by fast runs.
    expect(h.services.pool.size).toBe(0);
  });

  it('destroy an instance whose reset fails, and make another', async () => {
    h = await reusing();
    h.backend.failNext('reset', conflict('the sandbox could not be reset: left behind: /tmp/x'));
    const first = await fastRun(h);
    await h.services.runPool.settled();
    expect([...h.backend.instances.values()].map((i) => i.state.name)).not.toContain(first);
    expect(await fastRun(h)).not.toBe(first);
    await h.services.runPool.settled();
    expect(runners(h).length).toBeGreaterThanOrEqual(2);
  });

  it('wait for an instance whose reset is under way rather than make one, and have one made when that reset fails', async () => {
    for (const outcome of ['reset', 'failed'] as const) {
      // One instance, and no room in the memory budget for a spare.
      h = await reusing({ poolSize: 1, poolMemoryMb: IDLE_INSTANCE_MB });
      const reset = h.backend.reset.bind(h.backend);
      let finish: () => void = () => undefined;
      h.backend.reset = async (id) => {
        await new Promise<void>((resolve) => (finish = resolve));
        if (outcome === 'failed') throw conflict('the sandbox could not be reset: left behind: /tmp/x');
        return reset(id);
      };
      const first = await fastRun(h);
      // The one instance is being reset: the next run waits for it, and the pool makes none for it.
      const creates = () => h.backend.calls.filter((c) => c.op === 'create').length;
      const before = creates();
      let second: string | undefined;
      const running = fastRun(h).then((name) => (second = name));
      try {
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(second, outcome).toBeUndefined();
        expect(creates(), outcome).toBe(before);
      } finally {
        h.backend.reset = reset;
        finish();
      }
      await running;
      if (outcome === 'reset') expect(second).toBe(first);
      else expect(second).not.toBe(first);
      await h.close();
    }
  });

  it('grow with the runs in use at once, within the memory budget, and shrink once idle', async () => {
    const clock = manualClock();
    h = await reusing({}, clock.clock);
    await Promise.all(Array.from({ length: 6 }, () => fastRun(h)));
    await h.services.runPool.settled();
    // Six at once and two spare.
    expect(h.services.runPool.target(KEY)).toBe(8);
    expect(runners(h)).toHaveLength(8);
    clock.advance(61);
    h.services.runPool.evictIdle();
    await h.services.runPool.settled();
    expect(runners(h)).toHaveLength(2);
  });

  it('grow no further than the memory budget', async () => {
    h = await reusing({ poolMemoryMb: 4 * IDLE_INSTANCE_MB });
    await Promise.all(Array.from({ length: 6 }, () => fastRun(h)));
    await h.services.runPool.settled();
    expect(runners(h)).toHaveLength(4);
  });

  it('replace an instance after its last allowed run', async () => {
    h = await reusing({ poolSize: 1 });
    const first = await fastRun(h);
    await h.services.runPool.settled();
    const instance = runners(h).find((i) => i.state.name === first)!;
    for (let i = 2; i < MAX_RUNS_PER_INSTANCE; i++) {
      const taken = h.services.runPool.take(KEY);
      const made = await taken.instance;
      expect(made.name).toBe(first);
      h.services.runPool.release(made);
      await h.services.runPool.settled();
    }
    expect(await fastRun(h)).toBe(first);
    await h.services.runPool.settled();
    expect(h.backend.instances.has(instance.state.id)).toBe(false);
  });
});
