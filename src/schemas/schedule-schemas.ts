import { z } from 'zod';
import { resourceName, timestamp } from './common.js';

/** A durable object class name (`classes` is reserved for the class routes). */
export const CLASS_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,62}$/;
/** A durable object id within its class. */
export const OBJECT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,254}$/;
/** A method name; a leading `_` (private) cannot match, so private methods are never callable. */
export const METHOD_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

export const SCHEDULE_STATUSES = ['active', 'paused', 'completed', 'failed'] as const;
export const RUN_STATUSES = ['running', 'succeeded', 'failed', 'skipped', 'missed', 'interrupted'] as const;

const scheduleStatus = z.enum(SCHEDULE_STATUSES).meta({
  description: 'active: fires; paused: held (next_fire_at null); completed: a one-shot ran or was missed, or a cron passed end_at; failed: a one-shot run failed',
});
const runStatus = z.enum(RUN_STATUSES).meta({
  description:
    'running; succeeded; failed (the target failed, or a command exited non-zero); skipped (overlap: the previous run still ran); ' +
    'missed (misfire skip: occurrences late by more than 60 s); interrupted (the server stopped during the run, which is not fired again)',
});

/** Schedule names, as sandbox names. */
export const scheduleName = resourceName;
const className = z
  .string({ error: 'must be a string' })
  .regex(CLASS_NAME_PATTERN, 'must match ^[A-Za-z][A-Za-z0-9_.-]{0,62}$')
  .refine((value) => value !== 'classes', "'classes' is reserved");
const objectId = z.string({ error: 'must be a string' }).regex(OBJECT_ID_PATTERN, 'must match ^[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,254}$');
const method = z
  .string({ error: 'must be a string' })
  .regex(METHOD_PATTERN, 'must match ^[A-Za-z][A-Za-z0-9_]{0,63}$ (a leading _ marks a private method, never callable)');
const cron = z
  .string({ error: 'must be a string' })
  .min(1)
  .max(200)
  .meta({
    description:
      'Cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6 with leading seconds, or a nickname ' +
      '(@hourly @daily @weekly @monthly @yearly @annually @midnight); day-of-month and day-of-week are ORed as in POSIX cron',
  });
const rfc3339 = z.string({ error: 'must be a string' }).max(64).meta({ description: 'RFC 3339 timestamp, e.g. 2026-01-01T12:00:00Z' });
const timezone = z
  .string({ error: 'must be a string' })
  .min(1)
  .max(64)
  .meta({ description: 'IANA time zone the cron expression is read in, default UTC' });
const args = z
  .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
  .meta({
    description:
      'The target\'s arguments: an object method\'s args; an orchestration\'s input; for method exec an exec body ({command, ...}); for method run a /run body',
  });
const overlap = z.enum(['skip', 'allow']).meta({ description: 'skip (default): a firing while the previous run still runs is recorded skipped; allow: runs side by side' });
const misfire = z
  .enum(['fire_once', 'skip'])
  .meta({ description: 'After downtime or lateness over 60 s: fire_once (default) fires the latest missed occurrence once; skip records one missed run' });

export const createScheduleBody = z
  .strictObject({
    name: scheduleName,
    method: method.meta({ description: 'Object method; start for target_orchestration; exec for target_sandbox; run without a target' }),
    cron: cron.optional(),
    fire_at: rfc3339.optional().meta({ description: 'One-shot time (RFC 3339); exclusive with cron; up to 60 s in the past fires at once' }),
    args: args.optional(),
    target_class: className.optional().meta({ description: 'Durable object class; with target_object_id' }),
    target_object_id: objectId.optional().meta({ description: 'Durable object id; with target_class (auto-created on the first call)' }),
    target_orchestration: resourceName.optional().meta({ description: 'Orchestration definition name; method start' }),
    target_sandbox: resourceName.optional().meta({ description: 'Sandbox the command runs in; method exec' }),
    timezone: timezone.optional(),
    overlap: overlap.optional(),
    misfire: misfire.optional(),
    end_at: rfc3339.optional().meta({ description: 'A cron schedule completes once no occurrence is left before this time' }),
    status: z.enum(['active', 'paused']).optional().meta({ description: 'active (default) or paused' }),
  })
  .meta({ id: 'CreateSchedule' });

export const patchScheduleBody = z
  .strictObject({
    status: z.enum(['active', 'paused']).optional().meta({ description: 'paused holds the schedule; active resumes it from now (paused time is not caught up)' }),
    cron: cron.optional().meta({ description: 'A new cron expression (a one-shot schedule becomes a cron schedule)' }),
    fire_at: rfc3339.optional().meta({ description: 'A new one-shot time (a cron schedule becomes a one-shot schedule)' }),
    timezone: timezone.optional(),
    args: args.optional(),
    overlap: overlap.optional(),
    misfire: misfire.optional(),
    end_at: rfc3339.nullable().optional().meta({ description: 'A new end; null removes it' }),
  })
  .meta({ id: 'PatchSchedule' });

export const scheduleParams = z.object({ id: z.string().min(1).max(100).meta({ description: 'Schedule id or name' }) });

export const listSchedulesQuery = z.strictObject({
  status: z.enum(SCHEDULE_STATUSES).optional(),
  target_class: className.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100).meta({ description: 'At most this many, in name order; default 100' }),
});

export const listRunsQuery = z.strictObject({
  status: z.enum(RUN_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50).meta({ description: 'At most this many, newest first; default 50 (100 are kept)' }),
});

const nullableTime = timestamp.nullable();

export const schedule = z
  .object({
    id: z.string(),
    name: z.string(),
    cron: z.string().nullable(),
    fire_at: nullableTime,
    timezone: z.string(),
    method: z.string(),
    args: z.record(z.string(), z.unknown()),
    target_class: z.string().nullable(),
    target_object_id: z.string().nullable(),
    target_orchestration: z.string().nullable(),
    target_sandbox: z.string().nullable(),
    status: scheduleStatus,
    overlap: z.enum(['skip', 'allow']),
    misfire: z.enum(['fire_once', 'skip']),
    end_at: nullableTime,
    next_fire_at: nullableTime.meta({ description: 'The next occurrence; null while paused or once done' }),
    last_fired_at: nullableTime,
    last_run_status: runStatus.nullable(),
    fire_count: z.int().meta({ description: 'Firings that ran the target (triggers not counted)' }),
    trigger_count: z.int().meta({ description: 'Runs started by POST /schedules/{id}/trigger' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Schedule' });

export const scheduleRun = z
  .object({
    id: z.string(),
    schedule_id: z.string(),
    scheduled_for: timestamp.meta({ description: 'The occurrence this run is for (a trigger: when it was asked for)' }),
    started_at: timestamp.meta({ description: 'When it was claimed (fired) or recorded' }),
    finished_at: nullableTime,
    status: runStatus,
    missed_count: z.int().meta({ description: 'Occurrences folded into this run (fire_once) or that this missed run stands for (skip)' }),
    duration_ms: z.int().nullable(),
    result: z.unknown().meta({ description: "The target's result (an exec's {exit_code, stdout, stderr, ...}, a method's return value), at most 16 KiB of JSON" }),
    error: z.string().nullable(),
    orchestration_id: z.string().optional(),
  })
  .meta({ id: 'ScheduleRun' });

export type CreateScheduleInput = z.infer<typeof createScheduleBody>;
export type PatchScheduleInput = z.infer<typeof patchScheduleBody>;
export type ListSchedulesQuery = z.infer<typeof listSchedulesQuery>;
export type ListRunsQuery = z.infer<typeof listRunsQuery>;
export type ScheduleBody = z.infer<typeof schedule>;
export type ScheduleRunBody = z.infer<typeof scheduleRun>;
