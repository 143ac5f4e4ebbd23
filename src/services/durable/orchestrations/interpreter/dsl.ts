/**
 * The orchestration DSL (docs/decisions.md, "Orchestrations (interpreter)"): the shape of a
 * validated definition as zod schemas, the types inferred from them, and the limits and
 * defaults the interpreter applies. `validateDefinition` (validate.ts) is the only way to
 * obtain a `Definition` from client JSON: its hand-written checks name every problem's path,
 * then `definitionSchema` proves the shape these types describe.
 */
import { z } from 'zod';

/** Any JSON value (zod's own recursive JSON type). */
export const jsonValueSchema = z.json();
export type JsonValue = z.infer<typeof jsonValueSchema>;
export const jsonObjectSchema = z.record(z.string(), jsonValueSchema);
export type JsonObject = z.infer<typeof jsonObjectSchema>;

/** The step types the checks of validate.ts know; each is one of the schemas' below. */
export const STEP_TYPES = ['activity', 'timer', 'wait_for_event', 'parallel', 'map', 'set'] as const satisfies readonly Step['type'][];
export type StepType = Step['type'];
/** Whether `value` names a step type. */
export const isStepType = (value: unknown): value is StepType => (STEP_TYPES as readonly unknown[]).includes(value);

export const CONDITION_OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists', 'truthy'] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];

/** `{path, op, value}` (path without `${}`), or a combination (recursive through getters). */
export const conditionSchema = z.union([
  z.object({ path: z.string(), op: z.enum(CONDITION_OPS), value: jsonValueSchema.optional() }),
  z.object({
    get all(): z.ZodArray<typeof conditionSchema> {
      return z.array(conditionSchema);
    },
  }),
  z.object({
    get any(): z.ZodArray<typeof conditionSchema> {
      return z.array(conditionSchema);
    },
  }),
  z.object({
    get not(): typeof conditionSchema {
      return conditionSchema;
    },
  }),
]);
export type Condition = z.infer<typeof conditionSchema>;

export const retryPolicySchema = z.object({
  max_attempts: z.number(),
  initial_interval_ms: z.number(),
  backoff_coefficient: z.number(),
  max_interval_ms: z.number(),
  /** An attempt whose error message contains one of these is not retried. */
  non_retryable_errors: z.array(z.string()),
});
export type RetryPolicy = z.infer<typeof retryPolicySchema>;

/** Used for every field neither the step nor the definition's `defaults` sets. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  max_attempts: 3,
  initial_interval_ms: 1000,
  backoff_coefficient: 2,
  max_interval_ms: 30_000,
  non_retryable_errors: [],
};

export const RETRY_BOUNDS = {
  max_attempts: [1, 100],
  initial_interval_ms: [0, 86_400_000],
  backoff_coefficient: [1, 10],
  max_interval_ms: [0, 86_400_000],
} as const;

export const LIMITS = {
  /** Items a map's `items` may resolve to. */
  mapItems: 1000,
  mapConcurrencyDefault: 4,
  mapConcurrencyMax: 32,
  /** History events per instance; the instance fails `history limit reached` at this count. */
  historyEvents: 10_000,
  /** Bytes of a step output kept in history (beyond: truncated, `output_truncated: true`). */
  outputBytes: 1024 * 1024,
  /** Bytes of the instance input. */
  inputBytes: 1024 * 1024,
  /** Bytes of an activity's stderr kept (the last ones). */
  stderrBytes: 64 * 1024,
  /** Steps in a definition, counting nested ones. */
  steps: 500,
} as const;

export const STEP_ID = /^[a-z][a-z0-9_]{0,62}$/;
export const DEFINITION_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const EVENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/**
 * Fields every step has. Steps `.extend` it rather than spread its shape: with a spread,
 * TypeScript cannot infer the recursive getters below (parallel branches, a map's step).
 */
const stepBase = z.object({
  id: z.string(),
  when: conditionSchema.optional(),
  /** `continue`: a failure of this step (after its retries) gives output null and the run goes on. */
  on_error: z.enum(['fail', 'continue']).optional(),
});

/** Exactly one of run, exec, call. Bodies hold expressions until the step is scheduled. */
const activityStep = stepBase.extend({
  type: z.literal('activity'),
  output: z.enum(['text', 'json']).optional(),
  run: jsonObjectSchema.optional(),
  exec: jsonObjectSchema.optional(),
  call: jsonObjectSchema.optional(),
  retry_policy: retryPolicySchema.partial().optional(),
  retry_on_interrupt: z.boolean().optional(),
});

const timerStep = stepBase.extend({
  type: z.literal('timer'),
  duration: z.string().optional(),
  /** RFC 3339, or an expression resolving to one. */
  until: z.string().optional(),
});

const waitStep = stepBase.extend({
  type: z.literal('wait_for_event'),
  event: z.string(),
  timeout: z.string().optional(),
  on_timeout: z.enum(['fail', 'continue']).optional(),
});

const parallelStep = stepBase.extend({
  type: z.literal('parallel'),
  get branches(): z.ZodRecord<z.ZodString, z.ZodArray<typeof stepSchema>> {
    return z.record(z.string(), z.array(stepSchema));
  },
  fail_fast: z.boolean().optional(),
});

/** `step` runs once per item; its `id` is optional (its path is `<map id>[<index>]`). */
const mapStep = stepBase.extend({
  type: z.literal('map'),
  /** One expression resolving to an array, or an array (whose items may hold expressions). */
  items: z.union([z.string(), z.array(jsonValueSchema)]),
  get step(): typeof mapItemSchema {
    return mapItemSchema;
  },
  max_concurrency: z.number().optional(),
});

const setStep = stepBase.extend({ type: z.literal('set'), value: jsonValueSchema });

/** One step of a definition. */
export const stepSchema = z.discriminatedUnion('type', [activityStep, timerStep, waitStep, parallelStep, mapStep, setStep]);

/** The step of a map: any step, its id optional. */
const optionalId = { id: z.string().optional() };
export const mapItemSchema = z.discriminatedUnion('type', [
  activityStep.extend(optionalId),
  timerStep.extend(optionalId),
  waitStep.extend(optionalId),
  parallelStep.extend(optionalId),
  mapStep.extend(optionalId),
  setStep.extend(optionalId),
]);

export type Step = z.infer<typeof stepSchema>;
export type ActivityStep = z.infer<typeof activityStep>;
export type TimerStep = z.infer<typeof timerStep>;
export type WaitStep = z.infer<typeof waitStep>;
export type ParallelStep = z.infer<typeof parallelStep>;
export type MapStep = z.infer<typeof mapStep>;
export type SetStep = z.infer<typeof setStep>;
export type MapItemStep = z.infer<typeof mapItemSchema>;

export const definitionDefaultsSchema = z.object({
  image: z.string().optional(),
  profile: z.string().optional(),
  timeout_ms: z.number().optional(),
  retry_policy: retryPolicySchema.partial().optional(),
});
export type DefinitionDefaults = z.infer<typeof definitionDefaultsSchema>;

/** A validated definition (the read-only fields of a GET left out). */
export const definitionSchema = z.object({
  name: z.string(),
  description: z.string().optional(),
  defaults: definitionDefaultsSchema.optional(),
  steps: z.array(stepSchema),
  /** The instance output (expressions resolved); the last step's output when absent. */
  output: jsonValueSchema.optional(),
});
export type Definition = z.infer<typeof definitionSchema>;

/** Whether `value` has the shape of a `Definition` (the schema, so the type is proven, not cast). */
export const isDefinition = (value: unknown): value is Definition => definitionSchema.safeParse(value).success;

/** The retry policy of an activity: step fields, then the definition's defaults, then ours. */
export function retryPolicyOf(step: ActivityStep, defaults: DefinitionDefaults | undefined): RetryPolicy {
  return { ...DEFAULT_RETRY_POLICY, ...defaults?.retry_policy, ...step.retry_policy };
}

/** Milliseconds before attempt `attempt + 1` after attempt `attempt` failed. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const raw = policy.initial_interval_ms * policy.backoff_coefficient ** (attempt - 1);
  return Math.min(Math.round(raw), policy.max_interval_ms);
}
