import { DURATION_PATTERN } from '../../schemas/common.js';
import { badRequest } from '../../errors.js';

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Milliseconds of a duration such as 30m, 2h or 1d; BAD_REQUEST for anything else. */
export function parseDuration(value: string, field = 'by'): number {
  const match = DURATION_PATTERN.exec(value);
  if (!match) throw badRequest(`${field}: '${value}' must be a duration like 30m, 2h or 1d`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** `from` moved forward by a duration. */
export const addDuration = (from: Date, value: string, field?: string): Date =>
  new Date(from.getTime() + parseDuration(value, field));
