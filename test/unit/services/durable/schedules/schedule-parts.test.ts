import { describe, expect, it } from 'vitest';
import {
  capResult,
  cronCalculator,
  dueOccurrences,
  MAX_COUNTED,
  MAX_RESULT_BYTES,
  nextStatus,
  parseTimestamp,
  requireTransition,
  SCHEDULE_TRANSITIONS,
} from '../../../../../src/services/durable/schedules/index.js';

const d = (iso: string) => new Date(iso);

describe('cron calculator', () => {
  it('walks due occurrences, splitting late from on time at now - 60 s', () => {
    const every = cronCalculator('* * * * *', 'UTC');
    const due = dueOccurrences(every, d('2026-01-01T00:01:00Z'), d('2026-01-01T00:05:30Z'));
    expect(due).toEqual({
      late: { count: 4, latest: d('2026-01-01T00:04:00Z') },
      onTime: { count: 1, latest: d('2026-01-01T00:05:00Z') },
      next: d('2026-01-01T00:06:00Z'),
    });
  });

  it('counts at most MAX_COUNTED late occurrences, then jumps to the on-time window', () => {
    const secondly = cronCalculator('* * * * * *', 'UTC');
    const due = dueOccurrences(secondly, d('2026-01-01T00:00:00Z'), d('2026-01-02T00:00:00Z'));
    expect(due.late.count).toBe(MAX_COUNTED);
    expect(due.onTime.count).toBe(61);
    expect(due.next).toEqual(d('2026-01-02T00:00:01Z'));
  });

  it('reads nicknames and 6 fields, and the same expression in another zone', () => {
    expect(cronCalculator('@daily', 'UTC').next(d('2026-01-01T10:00:00Z'))).toEqual(d('2026-01-02T00:00:00Z'));
    expect(cronCalculator('@DAILY', 'Asia/Tokyo').next(d('2026-01-01T10:00:00Z'))).toEqual(d('2026-01-01T15:00:00Z'));
    expect(cronCalculator('30 0 12 * * *', 'UTC').next(d('2026-01-01T10:00:00Z'))).toEqual(d('2026-01-01T12:00:30Z'));
    // POSIX OR of day-of-month and day-of-week: the 1st, or any Monday.
    expect(cronCalculator('0 0 1 * 1', 'UTC').next(d('2026-01-02T00:00:00Z'))).toEqual(d('2026-01-05T00:00:00Z'));
  });
});

describe('statuses', () => {
  it('allows exactly the transitions of the table', () => {
    for (const { from, on, to } of SCHEDULE_TRANSITIONS) expect(nextStatus(from, on)).toBe(to);
    expect(nextStatus('completed', 'resume')).toBeUndefined();
    expect(nextStatus('failed', 'pause')).toBeUndefined();
    expect(() => requireTransition('x', 'completed', 'resume')).toThrow("schedule 'x' is completed");
  });
});

describe('timestamps and results', () => {
  it('takes RFC 3339 in any offset and gives UTC with milliseconds; refuses the rest naming the field', () => {
    expect(parseTimestamp('2026-03-01T12:00:00+02:00', 'fire_at')).toBe('2026-03-01T10:00:00.000Z');
    expect(parseTimestamp('2026-03-01t12:00:00.5z', 'end_at')).toBe('2026-03-01T12:00:00.500Z');
    for (const bad of ['2026-03-01', '2026-02-29T00:00:00Z', '2026-01-01T24:00:00Z', '2026-01-01T00:00:00', 'now']) {
      expect(() => parseTimestamp(bad, 'fire_at')).toThrow(/^fire_at: '.*' is not an RFC 3339 timestamp/);
    }
  });

  it('caps a result at 16 KiB of JSON, keeping the end of the longest strings', () => {
    const small = { exit_code: 0, stdout: 'ok\n' };
    expect(capResult(small)).toBe(small);
    const big = capResult({ exit_code: 1, stdout: 'x'.repeat(40_000) + 'END', stderr: 'e'.repeat(10_000), truncated: false }) as Record<string, unknown>;
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(MAX_RESULT_BYTES);
    expect(big).toMatchObject({ exit_code: 1, truncated: true, stdout: expect.stringMatching(/END$/) });
    const list = capResult(Array.from({ length: 5000 }, (_, i) => i)) as Record<string, unknown>;
    expect(list.truncated).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(list))).toBeLessThanOrEqual(MAX_RESULT_BYTES);
  });
});
