import { z } from 'zod';
import { imageReference, profile, resourceName, timestamp } from './common.js';

/** Class names: `classes` is taken by the class routes (`/objects/classes/...`). */
export const CLASS_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,62}$/;
export const OBJECT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,254}$/;
/** Callable method names; a leading `_` marks a private method, which no call reaches. */
export const METHOD_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** Longest a method may run, and the default. */
export const MAX_OBJECT_TIMEOUT_MS = 300_000;
export const DEFAULT_OBJECT_TIMEOUT_MS = 30_000;
/** Largest storage an object's class may allow. */
export const MAX_OBJECT_STORAGE_BYTES = 16 * 1024 * 1024;
/** Largest module source a class may register. */
export const MAX_CLASS_SOURCE_BYTES = 1024 * 1024;

export const className = z
  .string({ error: 'must be a string' })
  .regex(CLASS_NAME_PATTERN, 'must match ^[A-Za-z][A-Za-z0-9_.-]{0,62}$ (a letter, then letters, digits, _ . -; at most 63)')
  .refine((name) => name !== 'classes', "'classes' is reserved");
export const objectId = z
  .string({ error: 'must be a string' })
  .regex(OBJECT_ID_PATTERN, 'must match ^[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,254}$ (at most 255)');
export const methodName = z
  .string({ error: 'must be a string' })
  .regex(METHOD_PATTERN, 'must match ^[A-Za-z][A-Za-z0-9_]{0,63}$ (methods starting with _ are private)');

const runtime = z.enum(['node', 'python'], { error: 'must be node or python' });
const idleTimeout = z
  .int({ error: 'must be an integer' })
  .min(1, 'must be at least 1')
  .max(30 * 86_400, 'must be at most 2592000 (30 days)')
  .meta({ description: 'Seconds without a call after which the object hibernates (its managed sandbox stops); default 300' });

/** The fields of a class definition; `defineClassBody` adds the checks across fields. */
export const defineClassFields = z.strictObject({
  name: className,
  runtime,
  source: z
    .string({ error: 'must be a string' })
    .min(1, 'must not be empty')
    .max(MAX_CLASS_SOURCE_BYTES, 'must be at most 1 MiB')
    .optional()
    .meta({
      description:
        'The module: node, an ES module whose exported functions `(args, ctx)` are the methods, or whose default export is a class; python, a module of functions `(args, ctx)`',
    }),
  handlers: z
    .record(methodName, z.string({ error: 'handler bodies must be strings' }).min(1).max(65_536))
    .optional()
    .meta({ description: 'node only, instead of source: {method: "(input, state) => result"}, where state is a mutable copy of the storage' }),
  image: imageReference.optional().meta({ description: 'Image of the objects\' sandboxes; default sandboxd/node:bookworm or sandboxd/python:bookworm by runtime' }),
  profile: profile.optional().meta({ description: 'Security profile of the objects\' sandboxes, default moderate' }),
  vcpus: z.int({ error: 'must be an integer' }).min(1, 'must be at least 1').optional().meta({ description: 'default 1' }),
  memory_mb: z.int({ error: 'must be an integer' }).min(32, 'must be at least 32').optional().meta({ description: 'default 256' }),
  timeout_ms: z
    .int({ error: 'must be an integer' })
    .min(1, 'must be at least 1')
    .max(MAX_OBJECT_TIMEOUT_MS, `must be at most ${MAX_OBJECT_TIMEOUT_MS}`)
    .optional()
    .meta({ description: `Longest a method call may run, default ${DEFAULT_OBJECT_TIMEOUT_MS}` }),
  idle_timeout_seconds: idleTimeout.optional(),
  max_storage_bytes: z
    .int({ error: 'must be an integer' })
    .min(1024, 'must be at least 1024')
    .max(MAX_OBJECT_STORAGE_BYTES, `must be at most ${MAX_OBJECT_STORAGE_BYTES} (16 MiB)`)
    .optional()
    .meta({ description: "Largest storage (as JSON) of one object; default the server's --object-max-storage (4 MiB)" }),
  setup: z
    .array(z.string({ error: 'must be an array of strings' }), { error: 'must be an array of strings' })
    .min(1, 'must not be empty')
    .max(256)
    .optional()
    .meta({ description: 'A command run once per sandbox and class version in the class folder, e.g. ["npm","install","lodash"]' }),
  validate: z.boolean({ error: 'must be true or false' }).optional().meta({ description: 'Check the source parses (in a sandbox of the class image), default true' }),
});

export const defineClassBody = defineClassFields
  .refine((body) => (body.source === undefined) !== (body.handlers === undefined), {
    message: 'give exactly one of source and handlers',
    path: ['source'],
  })
  .refine((body) => body.handlers === undefined || body.runtime === 'node', { message: 'handlers are for the node runtime only', path: ['handlers'] })
  .meta({ id: 'DefineObjectClass' });

export const objectClassSummary = z
  .object({
    name: z.string(),
    runtime,
    image: z.string(),
    profile,
    vcpus: z.int(),
    memory_mb: z.int(),
    timeout_ms: z.int(),
    idle_timeout_seconds: z.int(),
    max_storage_bytes: z.int(),
    setup: z.array(z.string()).nullable(),
    methods: z.array(z.string()).nullable().meta({ description: 'The callable methods, known after the first call of this version; null before' }),
    version: z.int().meta({ description: 'Grows by one when the source or a setting changes' }),
    sha256: z.string().meta({ description: 'Of the source' }),
    object_count: z.int(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'ObjectClass' });

export const objectClassDetail = objectClassSummary
  .extend({
    source: z.string(),
    handlers: z.record(z.string(), z.string()).optional().meta({ description: 'As registered, for a class registered in the handlers form' }),
  })
  .meta({ id: 'ObjectClassDetail' });

export const classParams = z.object({ class: className });

export const createObjectBody = z
  .strictObject({
    class: className,
    object_id: objectId,
    sandbox: resourceName.optional().meta({ description: 'Run the methods in this existing sandbox instead of a managed one (never stopped or removed by the object)' }),
    storage: z.record(z.string(), z.unknown(), { error: 'must be an object' }).optional().meta({ description: 'Initial state, default {}' }),
    idle_timeout_seconds: idleTimeout.optional(),
  })
  .meta({ id: 'CreateObject' });

export const objectStatus = z.enum(['active', 'hibernating']);

export const alarmView = z
  .object({
    fire_at: timestamp,
    method: z.string(),
    args: z.unknown(),
    attempts: z.int().meta({ description: 'Failed attempts so far; retried after 2, 4, ... 64 s, then dropped' }),
  })
  .meta({ id: 'ObjectAlarm' });

export const objectView = z
  .object({
    id: z.string(),
    class: z.string(),
    object_id: z.string(),
    status: objectStatus,
    sandbox: z.string().meta({ description: 'The sandbox its methods run in' }),
    sandbox_managed: z.boolean().meta({ description: 'true: the object made the sandbox, stops it when idle and removes it with the object' }),
    storage: z.record(z.string(), z.unknown()),
    storage_bytes: z.int(),
    idle_timeout_seconds: z.int(),
    alarm: alarmView.nullable(),
    last_alarm_error: z.string().optional().meta({ description: 'Why the last alarm was given up' }),
    last_call_at: timestamp.nullable(),
    call_count: z.int(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'DurableObject' });

export const objectIdParams = z.object({ id: z.uuid({ error: 'must be an object id (a UUID)' }) });
export const objectNameParams = z.object({ class: className, object_id: objectId });
export const callParams = objectNameParams.extend({ method: methodName });

export const listObjectsQuery = z.strictObject({
  class: className.optional(),
  status: objectStatus.optional(),
  limit: z.coerce.number({ error: 'must be an integer' }).int('must be an integer').min(1, 'must be at least 1').max(1000, 'must be at most 1000').default(100),
});

export const patchObjectBody = z
  .strictObject({
    storage: z.record(z.string(), z.unknown(), { error: 'must be an object' }).optional().meta({ description: 'Replaces the whole state' }),
    status: objectStatus.optional().meta({ description: 'active wakes the object now; hibernating stops its managed sandbox now' }),
  })
  .refine((body) => body.storage !== undefined || body.status !== undefined, { message: 'give storage, status or both', path: ['storage'] })
  .meta({ id: 'PatchObject' });

export const callQuery = z.strictObject({
  timeout_ms: z.coerce
    .number({ error: 'must be an integer' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(MAX_OBJECT_TIMEOUT_MS, `must be at most ${MAX_OBJECT_TIMEOUT_MS}`)
    .optional()
    .meta({ description: "At most the class's timeout_ms" }),
  verbose: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true')
    .meta({ description: 'true: data is {result, object_id, duration_ms, cold_start, logs}' }),
});

export const callHeaders = z.object({
  'idempotency-key': z
    .string()
    .min(1, 'must not be empty')
    .max(128, 'must be at most 128 characters')
    .optional()
    .meta({ description: 'A repeat with the same key (within 24 h) runs nothing and answers the first result, with Idempotent-Replay: true' }),
  'x-sandboxd-client': z
    .literal('mcp')
    .optional()
    .meta({ description: "Who makes the call, as the call log records it: `mcp` from sandboxd's MCP tools, `http` when absent" }),
});

export const verboseCallResult = z
  .object({
    result: z.unknown(),
    object_id: z.string().meta({ description: "The object's id (UUID)" }),
    duration_ms: z.int(),
    cold_start: z.boolean(),
    logs: z.string().meta({ description: 'What the method printed (console.log / print), the last 16 KiB' }),
  })
  .meta({ id: 'ObjectCallResult' });

export const setAlarmBody = z
  .strictObject({
    at: timestamp.optional().meta({ description: 'When to fire (RFC 3339); in the past fires at once; at most a year ahead' }),
    in_seconds: z.int({ error: 'must be an integer' }).min(0, 'must be at least 0').max(366 * 86_400, 'must be at most a year').optional(),
    method: methodName.optional().meta({ description: 'default alarm' }),
    args: z.unknown().optional(),
  })
  .refine((body) => !(body.at !== undefined && body.in_seconds !== undefined), { message: 'give at or in_seconds, not both', path: ['at'] })
  .meta({ id: 'SetObjectAlarm' });

export const alarmReply = z
  .object({ class: z.string(), object_id: z.string(), alarm: alarmView.nullable() })
  .meta({ id: 'ObjectAlarmState' });

export const callLogQuery = z.strictObject({
  limit: z.coerce.number({ error: 'must be an integer' }).int('must be an integer').min(1, 'must be at least 1').max(100, 'must be at most 100').default(50),
});

export const callLogEntry = z
  .object({
    call_id: z.string(),
    method: z.string(),
    source: z.enum(['http', 'alarm', 'schedule', 'orchestration', 'mcp']),
    started_at: timestamp,
    duration_ms: z.int(),
    outcome: z.enum(['ok', 'threw', 'timeout', 'error']),
    error: z.string().optional(),
    cold_start: z.boolean(),
    idempotency_key: z.string().optional(),
  })
  .meta({ id: 'ObjectCall' });

export type DefineClassInput = z.infer<typeof defineClassBody>;
export type ObjectClassSummary = z.infer<typeof objectClassSummary>;
export type ObjectClassDetail = z.infer<typeof objectClassDetail>;
export type CreateObjectInput = z.infer<typeof createObjectBody>;
export type ObjectView = z.infer<typeof objectView>;
export type PatchObjectInput = z.infer<typeof patchObjectBody>;
export type ListObjectsQuery = z.infer<typeof listObjectsQuery>;
export type SetAlarmInput = z.infer<typeof setAlarmBody>;
export type AlarmReply = z.infer<typeof alarmReply>;
export type CallLogEntry = z.infer<typeof callLogEntry>;
