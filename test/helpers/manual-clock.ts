import type { Clock } from '../../src/services/support/clock.js';

/** A clock the test moves by hand, so that TTLs and policies are tested without sleeping. */
export function manualClock(start = '2026-01-01T00:00:00.000Z'): { clock: Clock; advance: (seconds: number) => void } {
  let now = new Date(start);
  return {
    clock: () => now,
    advance: (seconds) => void (now = new Date(now.getTime() + seconds * 1000)),
  };
}
