import { z } from 'zod';
import { imageReferenceProblem } from '../domain/image-reference.js';
import { PROFILES } from '../domain/profiles.js';

/** Sandbox and snapshot names (docs/decisions.md, "Names, durations, timestamps"). */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const resourceName = z
  .string({ error: 'must be a string' })
  .regex(NAME_PATTERN, 'must match ^[a-z0-9][a-z0-9_.-]{0,62}$ (lowercase letters, digits, _ . -; at most 63)');

/** Durations such as 30s, 30m, 2h, 1d. */
export const DURATION_PATTERN = /^([1-9][0-9]{0,8})([smhd])$/;
/** Milliseconds of each duration unit. */
export const DURATION_UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** Longest duration a client may give (ttl, extend's by): 365 days. */
export const MAX_DURATION_MS = 365 * DURATION_UNIT_MS.d;
export const MAX_DURATION_TEXT = '365d';

/** Milliseconds of a duration that matches DURATION_PATTERN, undefined for anything else. */
export function durationMs(value: string): number | undefined {
  const match = DURATION_PATTERN.exec(value);
  return match ? Number(match[1]) * DURATION_UNIT_MS[match[2] as keyof typeof DURATION_UNIT_MS] : undefined;
}

/** The milliseconds of a duration that a schema has already checked (a config option). */
export function checkedDurationMs(value: string): number {
  const ms = durationMs(value);
  if (ms === undefined) throw new Error(`'${value}' is not a duration (<integer><s|m|h|d>)`);
  return ms;
}

export const duration = z
  .string({ error: 'must be a string' })
  .regex(DURATION_PATTERN, 'must be a duration like 30m, 2h or 1d (<integer><s|m|h|d>)')
  .refine((value) => (durationMs(value) ?? 0) <= MAX_DURATION_MS, `must be at most ${MAX_DURATION_TEXT}`)
  .meta({ description: `A duration: <integer><s|m|h|d>, at most ${MAX_DURATION_TEXT}` });

/**
 * An image reference in the engine's grammar (docs/decisions.md, "Image references"), checked
 * before the engine sees it: `[registry[:port]/]path[:tag][@digest]`.
 */
export const imageReference = z.string({ error: 'must be a string' }).check((ctx) => {
  const problem = imageReferenceProblem(ctx.value);
  if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
});

export const profile = z.enum(PROFILES, { error: `must be one of ${PROFILES.join(', ')}` });

/** The record-level message for a non-object; key and value problems keep their own. */
function objectOfStrings(issue: { code: string }): string | undefined {
  return issue.code === 'invalid_type' ? 'must be an object of string values' : undefined;
}

const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}$/;
export const labels = z.record(
  z.string().regex(LABEL_KEY, 'label keys are 1-63 of A-Z a-z 0-9 _ . / - (no colon)'),
  z.string({ error: 'label values must be strings' }).max(256, 'label values are at most 256 characters'),
  { error: objectOfStrings },
);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const envObject = z.record(
  z.string().regex(ENV_NAME, 'environment variable names are [A-Za-z_][A-Za-z0-9_]*'),
  z.string({ error: 'environment values must be strings' }),
  { error: objectOfStrings },
);

/** env as an object or an array of K=V strings; always an object after parsing. */
export const envInput = z.union(
  [
    envObject,
    z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'entries must look like NAME=value'))
      .transform((items) => Object.fromEntries(items.map((item) => [item.slice(0, item.indexOf('=')), item.slice(item.indexOf('=') + 1)]))),
  ],
  { error: 'must be an object of strings or an array of NAME=value strings' },
);

export const lifecycle = z
  .strictObject({
    auto_stop_after_seconds: z.int().positive().optional(),
    auto_archive_after_seconds: z.int().positive().optional(),
    auto_delete_after_seconds: z.int().positive().optional(),
  })
  .meta({ description: 'Lifecycle policy; thresholds in seconds' });

export const timestamp = z.string().meta({ description: 'RFC 3339 timestamp in UTC' });

/** The success envelope around a data schema. */
export const envelope = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });

/** A plain confirmation message such as "sandbox 'x' removed". */
export const message = envelope(z.string());
