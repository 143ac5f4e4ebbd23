import { z } from 'zod';
import { resourceName, timestamp } from './common.js';

/** Statuses of an orchestration instance (README, Orchestrations). */
export const INSTANCE_STATUSES = ['pending', 'running', 'waiting', 'completed', 'failed', 'terminated'] as const;
/** A caller-chosen instance id (idempotent start). */
export const INSTANCE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const EVENT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

const instanceId = z
  .string({ error: 'must be a string' })
  .regex(INSTANCE_ID_PATTERN, 'must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
  .meta({ description: 'Instance id' });
const json = z.unknown().meta({ description: 'Any JSON value' });
const dsl = z.record(z.string(), z.unknown(), { error: 'must be a JSON object (the orchestration DSL)' });

export const definitionParams = z.object({ name: resourceName });
export const instanceParams = z.object({ id: instanceId });

/**
 * POST /orchestrations/definitions: the DSL object. Only its shape as an object is checked
 * here; the interpreter's validation (definitionProblems) names each problem's path.
 */
export const definitionBody = dsl.meta({
  id: 'OrchestrationDefinitionRequest',
  description:
    '{name, description?, defaults?: {image, profile, timeout_ms, retry_policy}, steps: [...], output?}; step types activity ' +
    '(run | exec | call), timer, wait_for_event, parallel, map, set; expressions ${input.x}, ${steps.<id>.output}, ${item}',
});

export const definition = z
  .object({
    name: z.string(),
    version: z.int(),
    description: z.string().nullable(),
    defaults: z.looseObject({}).nullable(),
    steps: z.array(z.looseObject({ id: z.string(), type: z.string() })),
    output: json.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'OrchestrationDefinition' });

export const startBody = z
  .strictObject({
    name: resourceName.meta({ description: 'Definition name (or, with `definition`, the name of the inline one)' }),
    input: json.optional().meta({
      description:
        'The instance input (at most 1 MiB of JSON). With no definition of this name, an input holding activity / activities / ' +
        'wait_for_event is the agentkernel inline form, translated to a one-off definition',
    }),
    id: instanceId.optional().meta({ description: 'Caller-chosen id: the same id and name again answers 200 with the existing instance; another name 409' }),
    start_at: z
      .string({ error: 'must be a string' })
      .max(64)
      .refine((value) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value) && !Number.isNaN(Date.parse(value)), 'must be an RFC 3339 timestamp')
      .optional()
      .meta({ description: 'RFC 3339: the instance stays pending until then' }),
    definition: dsl.optional().meta({ description: 'An inline definition (the DSL), used for this instance only and not stored' }),
  })
  .meta({ id: 'StartOrchestration' });

export const listInstancesQuery = z.object({
  status: z.enum(INSTANCE_STATUSES, { error: `must be one of ${INSTANCE_STATUSES.join(', ')}` }).optional(),
  name: resourceName.optional(),
  limit: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(1).max(1000).default(100),
  before: instanceId.optional().meta({ description: 'Only instances created before this one (paging)' }),
});

export const getInstanceQuery = z.object({
  history: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('true')
    .transform((value) => value === 'true')
    .meta({ description: 'Include the history (default true)' }),
  steps_offset: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).default(0).meta({ description: 'The first step of the page (default 0)' }),
  steps_limit: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(1).max(1000).default(1000).meta({ description: 'Steps in the page (default and most 1000)' }),
  history_after: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(0).default(0).meta({ description: 'History events after this sequence (default 0)' }),
  history_limit: z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(1).max(1000).default(1000).meta({ description: 'History events in the page (default and most 1000)' }),
});

export const raiseEventBody = z
  .strictObject({
    name: z.string({ error: 'must be a string' }).regex(EVENT_NAME_PATTERN, 'must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    data: json.optional().meta({ description: "What the consuming wait_for_event step outputs (at most 1 MiB of JSON)" }),
  })
  .meta({ id: 'RaiseOrchestrationEvent' });

export const terminateBody = z
  .strictObject({ reason: z.string({ error: 'must be a string' }).min(1).max(1000).optional() })
  // No body at all is allowed (the reason defaults).
  .nullish()
  .meta({ id: 'TerminateOrchestration' });

export const eventAccepted = z.object({ accepted: z.literal(true), id: z.string(), event: z.string(), sequence: z.int() });
export const instanceDeleted = z.object({ deleted: z.literal(true), id: z.string() });

const historyEntry = z.object({ sequence: z.int(), type: z.string(), step: z.string().nullable(), data: z.looseObject({}), timestamp });

/** One step of an instance as the interpreter sees it; the fields past `status` appear where they apply. */
const instanceStep = z.looseObject({
  id: z.string(),
  type: z.string(),
  status: z.string(),
  attempts: z.int().optional(),
  started_at: timestamp.nullable().optional(),
  completed_at: timestamp.nullable().optional(),
  exit_code: z.int().nullable().optional(),
  output: json.optional(),
  output_truncated: z.literal(true).optional(),
  error: z.string().optional(),
  event: z.string().optional().meta({ description: 'wait_for_event: the event it waits for' }),
  deadline: timestamp.nullable().optional().meta({ description: "wait_for_event: its timeout's deadline" }),
  fire_at: timestamp.optional().meta({ description: 'timer: when it fires' }),
  retry_at: timestamp.optional().meta({ description: 'An activity waiting out a back-off: when it is retried' }),
});

export const instance = z
  .object({
    id: z.string(),
    name: z.string(),
    definition_version: z.int().meta({ description: 'The definition version the instance started with; 0 for an inline definition' }),
    status: z.enum(INSTANCE_STATUSES),
    input: json,
    output: json,
    output_truncated: z.literal(true).optional(),
    error: z.string().nullable(),
    failed_step: z.string().nullable(),
    created_at: timestamp,
    updated_at: timestamp,
    started_at: timestamp.nullable(),
    completed_at: timestamp.nullable(),
    start_at: timestamp.nullable(),
    steps: z.array(instanceStep).meta({
      description: 'Steps by path (list, checks.lint.lint, each[3]) with status pending, scheduled, running, retrying, completed, failed, skipped, waiting or cancelled',
    }),
    steps_total: z.int().meta({ description: 'Steps of the instance in all' }),
    steps_next: z.int().nullable().meta({ description: 'The steps_offset of the next page of steps; null when this page holds the last' }),
    waiting_for: z.array(z.string()),
    history: z.array(historyEntry).optional(),
    history_next: z.int().nullable().optional().meta({ description: 'The history_after of the next page of history; null when this page holds the last event' }),
  })
  .meta({ id: 'OrchestrationInstance' });

export type OrchestrationInstance = z.infer<typeof instance>;
export type OrchestrationDefinitionView = z.infer<typeof definition>;
