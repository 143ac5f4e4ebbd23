import { durationMs, MAX_DURATION_MS, MAX_DURATION_TEXT } from '../../schemas/common.js';
import { badRequest } from '../../errors.js';

/** Milliseconds of a duration such as 30m, 2h or 1d, at most 365d; BAD_REQUEST for anything else. */
export function parseDuration(value: string, field = 'by'): number {
  const ms = durationMs(value);
  if (ms === undefined) throw badRequest(`${field}: '${value}' must be a duration like 30m, 2h or 1d`);
  if (ms > MAX_DURATION_MS) throw badRequest(`${field}: must be at most ${MAX_DURATION_TEXT}`);
  return ms;
}

/** `from` moved forward by a duration. */
export const addDuration = (from: Date, value: string, field?: string): Date =>
  new Date(from.getTime() + parseDuration(value, field));
