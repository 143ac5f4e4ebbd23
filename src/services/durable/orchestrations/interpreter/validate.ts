/**
 * Validation of a definition at definition time, hand-written so that every problem names its
 * exact place: `steps[3].when.path: refers to step 'x' which is not before this step`. All
 * problems are reported at once, joined by `; ` into one BAD_REQUEST.
 *
 * Bodies of `run`, `exec` and `call` are checked with the /run and /exec request schemas (and
 * the call schema below), leaving out the fields whose value holds an expression (their type is
 * known only at run time, where the resolved body is checked again and a bad one fails the step).
 */
import { z } from 'zod';
import { badRequest, internalError } from '../../../../errors.js';
import { durationMs, MAX_DURATION_MS, MAX_DURATION_TEXT } from '../../../../schemas/common.js';
import { execBody, MAX_TIMEOUT_MS } from '../../../../schemas/exec-schemas.js';
import { runBody } from '../../../../schemas/run-schemas.js';
import {
  CONDITION_OPS,
  DEFINITION_NAME,
  EVENT_NAME,
  LIMITS,
  RETRY_BOUNDS,
  STEP_ID,
  STEP_TYPES,
  isDefinition,
  isStepType,
  type Definition,
  type StepType,
} from './dsl.js';
import { hasExpression } from './expressions.js';
import { conditionPathProblems, expressionProblems, type Scope } from './references.js';

type Obj = Record<string, unknown>;
const isObject = (value: unknown): value is Obj => value !== null && typeof value === 'object' && !Array.isArray(value);

const COMMON_FIELDS = ['id', 'type', 'when', 'on_error'];
const FIELDS: Record<StepType, string[]> = {
  activity: ['output', 'run', 'exec', 'call', 'retry_policy', 'retry_on_interrupt'],
  timer: ['duration', 'until'],
  wait_for_event: ['event', 'timeout', 'on_timeout'],
  parallel: ['branches', 'fail_fast'],
  map: ['items', 'step', 'max_concurrency'],
  set: ['value'],
};
/** Fields a GET of a definition adds; ignored so that a definition read back can be posted again. */
const READ_ONLY_FIELDS = ['version', 'created_at', 'updated_at'];
const TOP_FIELDS = ['name', 'description', 'defaults', 'steps', 'output'];

/** The body schemas of activities at definition time: a non-string stdin is sent as JSON. */
export const RUN_BODY = runBody.extend({ stdin: z.unknown().optional() });
export const EXEC_BODY = execBody.extend({ sandbox: z.string({ error: 'must be a string' }).min(1, 'must not be empty'), stdin: z.unknown().optional() });
export const CALL_BODY = z.strictObject({
  class: z.string({ error: 'must be a string' }).min(1, 'must not be empty'),
  object_id: z.string({ error: 'must be a string' }).min(1, 'must not be empty'),
  method: z.string({ error: 'must be a string' }).min(1, 'must not be empty'),
  args: z.unknown().optional(),
  timeout_ms: z.int({ error: 'must be an integer' }).min(1).max(MAX_TIMEOUT_MS).optional(),
});

/** `command[0]` from a zod issue path. */
const joinPath = (base: string, path: PropertyKey[]): string =>
  path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : `${out}.${String(key)}`), base);

const KINDS: Record<string, string> = { object: 'a JSON object', array: 'an array', string: 'a string', number: 'a number', int: 'an integer', boolean: 'a boolean' };

/** Our words where a schema gives none of its own (zod's defaults never reach a client). */
function words(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type') return `must be ${KINDS[issue.expected] ?? issue.expected}`;
  if (issue.code === 'too_small') return `must be at least ${Number(issue.minimum)}`;
  if (issue.code === 'too_big') return `must be at most ${Number(issue.maximum)}`;
  return undefined;
}

/** Problems of `value` against `schema`, each prefixed with where the value sits. */
export function schemaProblems(schema: z.ZodType, value: unknown, where: string): string[] {
  const result = schema.safeParse(value, { reportInput: true, error: words });
  if (result.success) return [];
  return result.error.issues.map((issue) => {
    const at = joinPath(where, issue.path);
    if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => `${at}: unknown field '${key}'`).join('; ');
    if (issue.code === 'invalid_type' && issue.input === undefined) return `${at}: is required`;
    return `${at}: ${issue.message}`;
  });
}

/** Collects problems while walking a definition. */
class Checker {
  readonly problems: string[] = [];
  stepCount = 0;

  add(...problems: string[]): void {
    this.problems.push(...problems);
  }

  fields(value: Obj, allowed: string[], where: string): void {
    for (const key of Object.keys(value)) if (!allowed.includes(key)) this.add(`${where}: unknown field '${key}'`);
  }

  oneOf(value: unknown, options: readonly string[], where: string): void {
    if (value !== undefined && (typeof value !== 'string' || !options.includes(value))) this.add(`${where}: must be one of ${options.join(', ')}`);
  }

  boolean(value: unknown, where: string): void {
    if (value !== undefined && typeof value !== 'boolean') this.add(`${where}: must be a boolean`);
  }

  integer(value: unknown, where: string, min: number, max: number): void {
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isInteger(value)) this.add(`${where}: must be an integer`);
    else if (value < min || value > max) this.add(`${where}: must be between ${min} and ${max}`);
  }

  duration(value: unknown, where: string): void {
    if (value === undefined) return;
    const ms = typeof value === 'string' ? durationMs(value) : undefined;
    if (ms === undefined) this.add(`${where}: must be a duration like 30s, 10m, 2h or 1d`);
    else if (ms > MAX_DURATION_MS) this.add(`${where}: must be at most ${MAX_DURATION_TEXT}`);
  }

  expressions(value: unknown, where: string, scope: Scope): void {
    this.add(...expressionProblems(value, where, scope));
  }

  retryPolicy(value: unknown, where: string): void {
    if (value === undefined) return;
    if (!isObject(value)) return this.add(`${where}: must be a JSON object`);
    this.fields(value, [...Object.keys(RETRY_BOUNDS), 'non_retryable_errors'], where);
    for (const [field, [min, max]] of Object.entries(RETRY_BOUNDS)) {
      const at = `${where}.${field}`;
      const entry = value[field];
      if (field !== 'backoff_coefficient') this.integer(entry, at, min, max);
      else if (entry !== undefined && (typeof entry !== 'number' || !Number.isFinite(entry) || entry < min || entry > max)) {
        this.add(`${at}: must be a number between ${min} and ${max}`);
      }
    }
    const errors = value.non_retryable_errors;
    if (errors !== undefined && (!Array.isArray(errors) || errors.length > 50 || errors.some((item) => typeof item !== 'string' || !item))) {
      this.add(`${where}.non_retryable_errors: must be an array of at most 50 non-empty strings`);
    }
  }

  condition(value: unknown, where: string, scope: Scope, depth = 0): void {
    if (!isObject(value)) return this.add(`${where}: must be a JSON object ({path, op, value}, {all}, {any} or {not})`);
    if (depth > 16) return this.add(`${where}: conditions nest at most 16 deep`);
    const key = ['all', 'any', 'not'].find((name) => name in value);
    if (key !== undefined) {
      if (Object.keys(value).length !== 1) return this.add(`${where}: a condition with '${key}' takes no other field`);
      if (key === 'not') return this.condition(value.not, `${where}.not`, scope, depth + 1);
      const list = value[key];
      if (!Array.isArray(list) || list.length === 0) return this.add(`${where}.${key}: must be a non-empty array of conditions`);
      list.forEach((inner, index) => this.condition(inner, `${where}.${key}[${index}]`, scope, depth + 1));
      return;
    }
    this.fields(value, ['path', 'op', 'value'], where);
    if (typeof value.path !== 'string') this.add(`${where}.path: is required (a path such as steps.x.output.ok)`);
    else this.add(...conditionPathProblems(value.path, `${where}.path`, scope));
    if (value.op === undefined) this.add(`${where}.op: is required`);
    else this.oneOf(value.op, CONDITION_OPS, `${where}.op`);
    if (value.op === 'in' && value.value !== undefined && !Array.isArray(value.value) && !(typeof value.value === 'string' && hasExpression(value.value))) {
      this.add(`${where}.value: must be an array for op 'in'`);
    }
    this.expressions(value.value, `${where}.value`, scope);
  }

  /** A list of steps: ids unique in it, each step seeing the ones before it. */
  steps(value: unknown, where: string, scope: Scope): void {
    if (!Array.isArray(value) || value.length === 0) return this.add(`${where}: must be a non-empty array of steps`);
    const visible = new Map(scope.visible);
    const seen = new Map<string, string>();
    value.forEach((step, index) => {
      const at = `${where}[${index}]`;
      const type = this.step(step, at, { ...scope, visible }, true);
      if (!isObject(step) || typeof step.id !== 'string') return;
      const first = seen.get(step.id);
      if (first !== undefined) this.add(`${at}.id: duplicate id '${step.id}' (also ${first}.id)`);
      else seen.set(step.id, at);
      if (type) visible.set(step.id, type);
    });
  }

  /** One step; returns its type when it is a known one. */
  step(value: unknown, where: string, scope: Scope, needsId: boolean): StepType | undefined {
    this.stepCount += 1;
    if (!isObject(value)) {
      this.add(`${where}: must be a JSON object`);
      return undefined;
    }
    if (value.id === undefined ? needsId : typeof value.id !== 'string' || !STEP_ID.test(value.id)) {
      this.add(`${where}.id: ${value.id === undefined ? 'is required' : 'must match ^[a-z][a-z0-9_]{0,62}$'}`);
    }
    const stepType = value.type;
    if (!isStepType(stepType)) {
      this.add(`${where}.type: ${stepType === undefined ? 'is required' : `unknown step type '${String(stepType)}'`} (one of ${STEP_TYPES.join(', ')})`);
      return undefined;
    }
    this.fields(value, [...COMMON_FIELDS, ...FIELDS[stepType]], where);
    if (value.when !== undefined) this.condition(value.when, `${where}.when`, scope);
    this.oneOf(value.on_error, ['fail', 'continue'], `${where}.on_error`);
    switch (stepType) {
      case 'activity':
        this.activity(value, where, scope);
        break;
      case 'timer':
        this.timer(value, where, scope);
        break;
      case 'wait_for_event':
        if (typeof value.event !== 'string' || !EVENT_NAME.test(value.event)) this.add(`${where}.event: ${value.event === undefined ? 'is required' : 'must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'}`);
        this.duration(value.timeout, `${where}.timeout`);
        this.oneOf(value.on_timeout, ['fail', 'continue'], `${where}.on_timeout`);
        if (value.on_timeout !== undefined && value.timeout === undefined) this.add(`${where}.on_timeout: needs a timeout`);
        break;
      case 'parallel':
        this.parallel(value, where, scope);
        break;
      case 'map':
        this.map(value, where, scope);
        break;
      case 'set':
        if (!('value' in value)) this.add(`${where}.value: is required`);
        this.expressions(value.value, `${where}.value`, scope);
        break;
    }
    return stepType;
  }

  activity(value: Obj, where: string, scope: Scope): void {
    const bodies = (['run', 'exec', 'call'] as const).filter((key) => value[key] !== undefined);
    if (bodies.length !== 1) {
      this.add(`${where}: an activity takes exactly one of run, exec, call${bodies.length ? ` (found ${bodies.join(', ')})` : ''}`);
    }
    for (const kind of bodies) {
      const body = value[kind];
      const at = `${where}.${kind}`;
      if (!isObject(body)) {
        this.add(`${at}: must be a JSON object`);
        continue;
      }
      // A field holding an expression is typed at run time; the others are checked now.
      const schema: z.ZodObject = kind === 'run' ? RUN_BODY : kind === 'exec' ? EXEC_BODY : CALL_BODY;
      // (An unknown field stays in, to be reported as unknown.)
      const deferred = Object.keys(body).filter((key) => Object.hasOwn(schema.shape, key) && typeof body[key] === 'string' && hasExpression(body[key]));
      const literal = Object.fromEntries(Object.entries(body).filter(([key]) => !deferred.includes(key)));
      const mask = Object.fromEntries(deferred.map((key) => [key, true]));
      this.add(...schemaProblems(schema.partial(mask as never), literal, at));
      this.expressions(body, at, scope);
    }
    this.oneOf(value.output, ['text', 'json'], `${where}.output`);
    if (value.output !== undefined && bodies.length === 1 && bodies[0] === 'call') this.add(`${where}.output: a call's output is the method's return value; output is for run and exec`);
    this.retryPolicy(value.retry_policy, `${where}.retry_policy`);
    this.boolean(value.retry_on_interrupt, `${where}.retry_on_interrupt`);
  }

  timer(value: Obj, where: string, scope: Scope): void {
    if ((value.duration === undefined) === (value.until === undefined)) return this.add(`${where}: a timer takes exactly one of duration, until`);
    this.duration(value.duration, `${where}.duration`);
    const until = value.until;
    if (until === undefined) return;
    if (typeof until !== 'string') return this.add(`${where}.until: must be an RFC 3339 timestamp or an expression`);
    if (hasExpression(until)) this.expressions(until, `${where}.until`, scope);
    else if (!isTimestamp(until)) this.add(`${where}.until: must be an RFC 3339 timestamp (2026-01-31T09:00:00Z) or an expression`);
  }

  parallel(value: Obj, where: string, scope: Scope): void {
    this.boolean(value.fail_fast, `${where}.fail_fast`);
    const branches = value.branches;
    if (!isObject(branches) || Object.keys(branches).length === 0) return this.add(`${where}.branches: must be a JSON object of named step lists`);
    for (const [name, list] of Object.entries(branches)) {
      if (!STEP_ID.test(name)) this.add(`${where}.branches: branch name '${name}' must match ^[a-z][a-z0-9_]{0,62}$`);
      this.steps(list, `${where}.branches.${name}`, scope);
    }
  }

  map(value: Obj, where: string, scope: Scope): void {
    const items = value.items;
    if (typeof items === 'string') {
      const whole = /^\$\{[^}]*\}$/.test(items);
      if (!whole) this.add(`${where}.items: must be one expression such as \${steps.list.output} (or an array)`);
      else this.expressions(items, `${where}.items`, scope);
    } else if (Array.isArray(items)) {
      if (items.length > LIMITS.mapItems) this.add(`${where}.items: must hold at most ${LIMITS.mapItems} items`);
      this.expressions(items, `${where}.items`, scope);
    } else {
      this.add(`${where}.items: ${items === undefined ? 'is required' : 'must be an expression or an array'}`);
    }
    this.integer(value.max_concurrency, `${where}.max_concurrency`, 1, LIMITS.mapConcurrencyMax);
    if (value.step === undefined) return this.add(`${where}.step: is required`);
    this.step(value.step, `${where}.step`, { ...scope, inMap: true }, false);
  }
}

/** True for an RFC 3339 timestamp with a time zone. */
export function isTimestamp(text: string): boolean {
  return /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text));
}

/** Every step id anywhere in a (possibly invalid) definition. */
function collectIds(value: unknown, ids: Set<string>): void {
  if (Array.isArray(value)) value.forEach((item) => collectIds(item, ids));
  else if (isObject(value)) {
    if (typeof value.id === 'string' && typeof value.type === 'string') ids.add(value.id);
    for (const key of ['steps', 'step', 'branches']) if (value[key] !== undefined) collectIds(key === 'branches' && isObject(value[key]) ? Object.values(value[key]) : value[key], ids);
  }
}

/** Every problem of a definition, each `<path>: <what is wrong>`; empty when it is valid. */
export function definitionProblems(raw: unknown): string[] {
  if (!isObject(raw)) return ['body: a JSON object is required'];
  const ids = new Set<string>();
  collectIds(raw.steps, ids);
  const checker = new Checker();
  checker.fields(raw, [...TOP_FIELDS, ...READ_ONLY_FIELDS], 'body');
  if (typeof raw.name !== 'string' || !DEFINITION_NAME.test(raw.name)) {
    checker.add(`name: ${raw.name === undefined ? 'is required' : 'must match ^[a-z0-9][a-z0-9_.-]{0,62}$ (lowercase letters, digits, _ . -; at most 63)'}`);
  }
  if (raw.description !== undefined && (typeof raw.description !== 'string' || raw.description.length > 1000)) checker.add('description: must be a string of at most 1000 characters');
  const defaults = raw.defaults;
  if (defaults !== undefined) {
    if (!isObject(defaults)) checker.add('defaults: must be a JSON object');
    else {
      checker.fields(defaults, ['image', 'profile', 'timeout_ms', 'retry_policy'], 'defaults');
      checker.add(...schemaProblems(RUN_BODY.pick({ image: true, profile: true, timeout_ms: true }), { image: defaults.image, profile: defaults.profile, timeout_ms: defaults.timeout_ms }, 'defaults'));
      checker.retryPolicy(defaults.retry_policy, 'defaults.retry_policy');
    }
  }
  const top: Scope = { visible: new Map(), inMap: false, allIds: ids };
  checker.steps(raw.steps, 'steps', top);
  if (checker.stepCount > LIMITS.steps) checker.add(`steps: at most ${LIMITS.steps} steps in all (found ${checker.stepCount})`);
  if (raw.output !== undefined && Array.isArray(raw.steps)) {
    const visible = new Map<string, StepType>();
    for (const step of raw.steps) if (isObject(step) && typeof step.id === 'string' && isStepType(step.type)) visible.set(step.id, step.type);
    checker.add(...expressionProblems(raw.output, 'output', { ...top, visible }));
  }
  return checker.problems;
}

/**
 * The definition when `raw` is valid; BAD_REQUEST naming every problem otherwise. The checks
 * above find every problem with its path; `isDefinition` then proves the shape the interpreter's
 * types describe (a definition the checks pass but the schema refuses is a fault of ours).
 */
export function validateDefinition(raw: unknown): Definition {
  const problems = definitionProblems(raw);
  if (problems.length > 0 || !isObject(raw)) throw badRequest(problems.join('; '), { details: { problems } });
  const { version: _version, created_at: _created, updated_at: _updated, ...definition } = raw;
  if (!isDefinition(definition)) throw internalError(`orchestration definition '${String(definition.name)}' passed its checks but not the DSL schema`);
  return definition;
}
