/**
 * The orchestration DSL (docs/decisions.md, "Orchestrations (interpreter)"): the types of a
 * validated definition and the limits and defaults the interpreter applies. `validateDefinition`
 * (validate.ts) is the only way to obtain a `Definition` from client JSON.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export const STEP_TYPES = ['activity', 'timer', 'wait_for_event', 'parallel', 'map', 'set'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const CONDITION_OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists', 'truthy'] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];

/** `{path, op, value}` (path without `${}`), or a combination. */
export type Condition =
  | { path: string; op: ConditionOp; value?: JsonValue }
  | { all: Condition[] }
  | { any: Condition[] }
  | { not: Condition };

export interface RetryPolicy {
  max_attempts: number;
  initial_interval_ms: number;
  backoff_coefficient: number;
  max_interval_ms: number;
  /** An attempt whose error message contains one of these is not retried. */
  non_retryable_errors: string[];
}

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

interface StepBase {
  id: string;
  when?: Condition;
  /** `continue`: a failure of this step (after its retries) gives output null and the run goes on. */
  on_error?: 'fail' | 'continue';
}

/** Exactly one of run, exec, call. Bodies hold expressions until the step is scheduled. */
export interface ActivityStep extends StepBase {
  type: 'activity';
  output?: 'text' | 'json';
  run?: JsonObject;
  exec?: JsonObject;
  call?: JsonObject;
  retry_policy?: Partial<RetryPolicy>;
  retry_on_interrupt?: boolean;
}

export interface TimerStep extends StepBase {
  type: 'timer';
  duration?: string;
  /** RFC 3339, or an expression resolving to one. */
  until?: string;
}

export interface WaitStep extends StepBase {
  type: 'wait_for_event';
  event: string;
  timeout?: string;
  on_timeout?: 'fail' | 'continue';
}

export interface ParallelStep extends StepBase {
  type: 'parallel';
  branches: Record<string, Step[]>;
  fail_fast?: boolean;
}

/** `step` runs once per item; its `id` is optional (its path is `<map id>[<index>]`). */
export interface MapStep extends StepBase {
  type: 'map';
  items: string;
  step: Step;
  max_concurrency?: number;
}

export interface SetStep extends StepBase {
  type: 'set';
  value: JsonValue;
}

export type Step = ActivityStep | TimerStep | WaitStep | ParallelStep | MapStep | SetStep;

export interface DefinitionDefaults {
  image?: string;
  profile?: string;
  timeout_ms?: number;
  retry_policy?: Partial<RetryPolicy>;
}

export interface Definition {
  name: string;
  description?: string;
  defaults?: DefinitionDefaults;
  steps: Step[];
  /** The instance output (expressions resolved); the last step's output when absent. */
  output?: JsonValue;
}

/** The retry policy of an activity: step fields, then the definition's defaults, then ours. */
export function retryPolicyOf(step: ActivityStep, defaults: DefinitionDefaults | undefined): RetryPolicy {
  return { ...DEFAULT_RETRY_POLICY, ...defaults?.retry_policy, ...step.retry_policy };
}

/** Milliseconds before attempt `attempt + 1` after attempt `attempt` failed. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const raw = policy.initial_interval_ms * policy.backoff_coefficient ** (attempt - 1);
  return Math.min(Math.round(raw), policy.max_interval_ms);
}
