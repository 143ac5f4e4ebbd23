import { afterEach, describe, expect, it, vi } from 'vitest';
import { repeatEvery } from '../../../../src/services/support/background-loop.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

afterEach(() => vi.useRealTimers());

describe('repeatEvery', () => {
  it('runs every interval, goes on after a failure, and stops', async () => {
    vi.useFakeTimers();
    let runs = 0;
    const stop = repeatEvery(
      60,
      async () => {
        runs++;
        if (runs === 1) throw new Error('engine away');
      },
      silentLogger(),
    );
    await vi.advanceTimersByTimeAsync(59_000);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(runs).toBe(3);
    await stop();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(runs).toBe(3);
  });

  it('never runs with an interval of 0', async () => {
    vi.useFakeTimers();
    const work = vi.fn(async () => undefined);
    const stop = repeatEvery(0, work, silentLogger());
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(work).not.toHaveBeenCalled();
    await stop();
  });
});
