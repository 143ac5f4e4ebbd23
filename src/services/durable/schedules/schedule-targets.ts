import type { z } from 'zod';
import { badRequest, isServiceError } from '../../../errors.js';
import { execBody, type ExecInput, type ExecResultBody } from '../../../schemas/exec-schemas.js';
import { runBody, type RunInput } from '../../../schemas/run-schemas.js';
import type { RunRecord, ScheduleRecord } from '../../../state/schedule-repository.js';
import type { ExecApi } from '../../commands/api.js';
import type { RunsApi } from '../../commands/api.js';
import type { SandboxesApi } from '../../sandboxes/api.js';
import type { ObjectCaller } from '../object-caller.js';
import type { OrchestrationStarter } from '../orchestration-starter.js';

/** The four kinds of target: an object method, an orchestration start, an exec in a sandbox, a /run. */
export type TargetKind = 'object' | 'orchestration' | 'sandbox' | 'run';

/** The method each kind of target requires (an object's is its own method name). */
const METHOD_OF: Record<Exclude<TargetKind, 'object'>, string> = { orchestration: 'start', sandbox: 'exec', run: 'run' };

/** Largest JSON text of a run's result. */
export const MAX_RESULT_BYTES = 16 * 1024;
/** Largest JSON text of a schedule's args. */
export const MAX_ARGS_BYTES = 64 * 1024;

/** What a schedule's target fields say, as the create body or a stored schedule has them. */
export interface TargetFields {
  method: string;
  args: Record<string, unknown>;
  target_class?: string | null | undefined;
  target_object_id?: string | null | undefined;
  target_orchestration?: string | null | undefined;
  target_sandbox?: string | null | undefined;
}

/** The parts targets run through. */
export interface TargetPorts {
  sandboxes: Pick<SandboxesApi, 'require'>;
  exec: Pick<ExecApi, 'exec' | 'gate'>;
  runs: Pick<RunsApi, 'run'>;
  objects: ObjectCaller;
  orchestrations: OrchestrationStarter;
}

/** How a target's invocation went. */
export interface TargetOutcome {
  ok: boolean;
  result: unknown;
  error: string | null;
  orchestration_id?: string;
}

/** A schedule's target with the fields its kind needs. */
export type Target =
  | { kind: 'object'; class: string; object_id: string }
  | { kind: 'orchestration'; definition: string }
  | { kind: 'sandbox'; sandbox: string }
  | { kind: 'run' };

/** The kind of target the fields name; BAD_REQUEST naming the field when they name several or half of one. */
export function targetKind(fields: TargetFields): TargetKind {
  return targetOf(fields).kind;
}

/** The target the fields name; BAD_REQUEST naming the field when they name several or half of one. */
export function targetOf(fields: TargetFields): Target {
  const named = [
    fields.target_class || fields.target_object_id ? 'target_class' : undefined,
    fields.target_orchestration ? 'target_orchestration' : undefined,
    fields.target_sandbox ? 'target_sandbox' : undefined,
  ].filter((name): name is string => name !== undefined);
  if (named.length > 1) throw badRequest(`${named[1]}: a schedule has one target; give only one of target_class, target_orchestration, target_sandbox`);
  if (fields.target_class && !fields.target_object_id) throw badRequest('target_object_id: is required with target_class');
  if (fields.target_object_id && !fields.target_class) throw badRequest('target_class: is required with target_object_id');
  if (fields.target_class && fields.target_object_id) return { kind: 'object', class: fields.target_class, object_id: fields.target_object_id };
  if (fields.target_orchestration) return { kind: 'orchestration', definition: fields.target_orchestration };
  if (fields.target_sandbox) return { kind: 'sandbox', sandbox: fields.target_sandbox };
  return { kind: 'run' };
}

/**
 * Checks what can be checked without the store: one target, the method it needs, args the
 * target accepts (an exec or /run body, through its schema and the gate), their size. Throws
 * BAD_REQUEST naming the field (FORBIDDEN from the gate).
 */
export function checkTarget(fields: TargetFields, ports: Pick<TargetPorts, 'exec'>): TargetKind {
  const kind = targetKind(fields);
  if (kind !== 'object' && fields.method !== METHOD_OF[kind]) {
    const why = { orchestration: 'with target_orchestration', sandbox: 'with target_sandbox', run: 'without a target (a /run)' }[kind];
    throw badRequest(`method: must be '${METHOD_OF[kind]}' ${why}, not '${fields.method}'`);
  }
  if (JSON.stringify(fields.args).length > MAX_ARGS_BYTES) throw badRequest(`args: at most ${MAX_ARGS_BYTES} bytes of JSON`);
  if (kind === 'sandbox') ports.exec.gate(parseArgs(execBody, fields.args, 'an exec body'));
  if (kind === 'run') ports.exec.gate(parseArgs(runBody, fields.args, 'a /run body'));
  return kind;
}

/** NOT_FOUND unless what the target names exists: the object class, the definition, the sandbox. */
export async function checkReferences(fields: TargetFields, ports: TargetPorts): Promise<void> {
  const target = targetOf(fields);
  if (target.kind === 'object') await ports.objects.requireClass(target.class);
  if (target.kind === 'orchestration') await ports.orchestrations.requireDefinition(target.definition);
  if (target.kind === 'sandbox') await ports.sandboxes.require(target.sandbox);
}

/**
 * The idempotency key of a run's object call: `schedule:<id>:<scheduled_for>`, the same for a
 * retry of the same occurrence; a trigger's run is keyed by its run id (two triggers are two calls).
 */
export const idempotencyKey = (schedule: Pick<ScheduleRecord, 'id'>, run: Pick<RunRecord, 'id' | 'scheduled_for' | 'manual'>) =>
  run.manual ? `schedule:${schedule.id}:trigger:${run.id}` : `schedule:${schedule.id}:${run.scheduled_for}`;

/**
 * Invokes a schedule's target for one run and says how it went; never throws. A command that
 * exits non-zero or times out is a failed run (its output is kept in the result).
 */
export async function invokeTarget(schedule: ScheduleRecord, run: RunRecord, ports: TargetPorts): Promise<TargetOutcome> {
  try {
    const target = targetOf(schedule);
    switch (target.kind) {
      case 'object': {
        const result = await ports.objects.callObject({
          class: target.class,
          object_id: target.object_id,
          method: schedule.method,
          args: schedule.args,
          idempotency_key: idempotencyKey(schedule, run),
          source: 'schedule',
        });
        return { ok: true, result: capResult(result ?? null), error: null };
      }
      case 'orchestration': {
        const { orchestration_id } = await ports.orchestrations.start({
          definition: target.definition,
          input: schedule.args,
          idempotency_key: idempotencyKey(schedule, run),
        });
        return { ok: true, result: { orchestration_id }, error: null, orchestration_id };
      }
      case 'sandbox':
        return commandOutcome(await ports.exec.exec(target.sandbox, parseArgs(execBody, schedule.args, 'an exec body')));
      case 'run':
        return commandOutcome(await ports.runs.run(parseArgs(runBody, schedule.args, 'a /run body')));
    }
  } catch (err) {
    return { ok: false, result: null, error: isServiceError(err) ? err.message : `internal error: ${(err as Error).message}` };
  }
}

/** A command's result as a run keeps it: `output` left out (stdout and stderr hold it). */
function commandOutcome(result: ExecResultBody): TargetOutcome {
  const { output: _output, ...kept } = result;
  const ok = result.exit_code === 0 && !result.timed_out;
  const error = ok ? null : result.timed_out ? 'the command timed out' : `the command exited with ${result.exit_code}`;
  return { ok, result: capResult(kept), error };
}

/**
 * A result whose JSON fits MAX_RESULT_BYTES: the longest strings of an object are cut to their
 * last part (where a command's errors are) and `truncated: true` is set; anything else too big
 * becomes `{truncated: true, json: <the start of its JSON>}`.
 */
export function capResult(value: unknown): unknown {
  const size = (v: unknown) => Buffer.byteLength(JSON.stringify(v) ?? 'null');
  if (size(value) <= MAX_RESULT_BYTES) return value;
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const out: Record<string, unknown> = { ...(value as Record<string, unknown>), truncated: true };
    for (let round = 0; round < 20 && size(out) > MAX_RESULT_BYTES; round++) {
      const [key, text] = Object.entries(out)
        .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
        .sort((a, b) => b[1].length - a[1].length)[0] ?? [undefined, ''];
      if (key === undefined || text.length === 0) break;
      const over = size(out) - MAX_RESULT_BYTES;
      out[key] = text.slice(Math.min(text.length, Math.max(over + 64, Math.ceil(text.length / 2))));
    }
    if (size(out) <= MAX_RESULT_BYTES) return out;
  }
  const json = JSON.stringify(value);
  return { truncated: true, json: json.slice(0, MAX_RESULT_BYTES - 1024) };
}

/** The args as the target's request body, or BAD_REQUEST naming the field under `args`. */
function parseArgs<S extends z.ZodType>(schema: S, args: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(args, { error: fallbackWords, reportInput: true });
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const path = ['args', ...issue.path.map(String)].join('.');
    if (issue.code === 'unrecognized_keys') return `${path}: unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    const missing = issue.code === 'invalid_type' && (issue.input === undefined || issue.input === null);
    return `${path}: ${missing ? 'is required' : issue.message}`;
  });
  throw badRequest(`${problems.join('; ')} (args must be ${what})`);
}

/** Words for issues whose schema gives none. */
function fallbackWords(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${issue.expected === 'object' ? 'a JSON object' : `a ${issue.expected}`}`;
    case 'too_small':
      return `must be at least ${String(issue.minimum)}`;
    case 'too_big':
      return `must be at most ${String(issue.maximum)}`;
    default:
      return 'is invalid';
  }
}
