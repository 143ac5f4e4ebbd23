/**
 * Carries out one activity attempt against the engines and reports how it went, as the input
 * `decide()` takes: `run` through RunsApi (a fresh warm-pool container), `exec` through
 * ExecApi in an existing sandbox, `call` through the ObjectCaller with the step's
 * Idempotency-Key. The body was resolved and checked by the interpreter; nothing here decides
 * what a result means (a non-zero exit code, output that is not JSON): decide() does.
 */
import { isServiceError } from '../../../errors.js';
import { z } from 'zod';
import { execBody, type ExecResultBody } from '../../../schemas/exec-schemas.js';
import { runBody } from '../../../schemas/run-schemas.js';
import type { ExecApi } from '../../commands/api.js';
import type { RunsApi } from '../../commands/api.js';
import type { ObjectCaller } from '../object-caller.js';
import type { ActivityCommand, DecideInput, JsonValue } from './interpreter/index.js';

export interface ActivityEngines {
  runs: Pick<RunsApi, 'run'>;
  exec: Pick<ExecApi, 'exec'>;
  objects: Pick<ObjectCaller, 'callObject'>;
}

/** An exec activity's body: the /exec request and the sandbox it runs in. */
const execActivityBody = execBody.extend({ sandbox: z.string() });

/** The outcome of one attempt, and how long it took by the wall clock. */
export type ActivityOutcome = Extract<DecideInput, { type: 'activity_completed' | 'activity_failed' }>;

/**
 * Runs `command`; aborting `signal` kills a run's or an exec's command (the run's container is
 * discarded by RunsApi). Never throws: an engine's refusal is a failed attempt.
 */
export async function runActivity(engines: ActivityEngines, command: ActivityCommand, signal: AbortSignal): Promise<ActivityOutcome> {
  const { step, attempt } = command;
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    if (command.kind === 'call') {
      const body = command.body as { class: string; object_id: string; method: string; args?: JsonValue; timeout_ms?: number };
      const value = await engines.objects.callObject({
        class: body.class,
        object_id: body.object_id,
        method: body.method,
        args: body.args ?? null,
        idempotency_key: command.idempotency_key,
        source: 'orchestration',
        // Only the call's own timeout: the definition's default is for run and exec, and an object
        // call may not ask for more than its class allows (the class's timeout applies otherwise).
        ...(body.timeout_ms !== undefined && { timeout_ms: body.timeout_ms }),
      });
      return { type: 'activity_completed', step, attempt, duration_ms: elapsed(), value: (value ?? null) as JsonValue };
    }
    const withTimeout = { ...command.body, ...(command.body.timeout_ms === undefined && command.timeout_ms !== null && { timeout_ms: command.timeout_ms }) };
    let result: ExecResultBody;
    // The interpreter checked the body against these schemas; parsing again gives the engines
    // the request type they take, as a route's parse does.
    if (command.kind === 'run') result = await engines.runs.run(runBody.parse(withTimeout), { signal });
    else {
      const { sandbox, ...body } = execActivityBody.parse(withTimeout);
      result = await engines.exec.exec(sandbox, body, { signal });
    }
    return { type: 'activity_completed', step, attempt, duration_ms: result.duration_ms, stdout: result.stdout, stderr: result.stderr, exit_code: result.exit_code };
  } catch (err) {
    const error = isServiceError(err) || err instanceof Error ? err.message : String(err);
    return { type: 'activity_failed', step, attempt, error: error || 'the activity failed' };
  }
}
