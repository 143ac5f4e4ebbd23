/**
 * The agentkernel inline form: `POST /orchestrations {name, input}` where no definition `name`
 * exists and `input` holds `activity`, `activities` or `wait_for_event`. It is translated into a
 * one-off definition (never stored):
 *
 * - `activities` (an array) or `activity` (one): each `{command, image?, profile?, env?, stdin?,
 *   workdir?, timeout_ms?, retry_policy?, name?}` becomes a `run` activity step, in order, with
 *   its `retry_policy`; `command` may be a string (run as `sh -c <string>`). Step ids are the
 *   activity's `name` when it is a valid id, else `activity_<n>` (n from 1).
 * - `wait_for_event`: an event name, or `{event (or name), timeout?, on_timeout?}`, waited for
 *   after the activities.
 * - The instance output is the last activity's stdout (null with no activity); the instance
 *   input is `input` without those keys.
 *
 * Problems are reported with the client's paths (`input.activities[1].command: ...`).
 */
import { badRequest, internalError } from '../../../../errors.js';
import { isDefinition, STEP_ID, type Definition, type JsonObject, type JsonValue } from './dsl.js';
import { definitionProblems } from './validate.js';

const INLINE_KEYS = ['activity', 'activities', 'wait_for_event'];
const RUN_FIELDS = ['command', 'image', 'profile', 'env', 'stdin', 'workdir', 'timeout_ms'];

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Whether a start request's `input` is the inline form. */
export function isInlineForm(input: unknown): boolean {
  return isObject(input) && INLINE_KEYS.some((key) => input[key] !== undefined);
}

/** The one-off definition and the instance input of an inline start; BAD_REQUEST naming the client's paths. */
export function translateInline(name: string, input: JsonObject): { definition: Definition; input: JsonValue } {
  const problems: string[] = [];
  const steps: JsonObject[] = [];
  const places: string[] = [];
  const list = input.activities ?? (input.activity === undefined ? [] : [input.activity]);
  const listPath = input.activities !== undefined ? 'input.activities' : 'input.activity';
  if (input.activities !== undefined && input.activity !== undefined) problems.push('input: give activity or activities, not both');
  if (!Array.isArray(list)) problems.push(`${listPath}: must be an array of activities`);
  else {
    const used = new Set<string>();
    list.forEach((activity, index) => {
      const at = input.activities !== undefined ? `${listPath}[${index}]` : listPath;
      if (!isObject(activity)) return problems.push(`${at}: must be a JSON object with a command`);
      for (const key of Object.keys(activity)) if (![...RUN_FIELDS, 'retry_policy', 'name'].includes(key)) problems.push(`${at}: unknown field '${key}'`);
      const run: JsonObject = {};
      for (const field of RUN_FIELDS) {
        const value = activity[field];
        if (value !== undefined) run[field] = value;
      }
      if (typeof run.command === 'string') run.command = ['sh', '-c', run.command];
      const wanted = typeof activity.name === 'string' && STEP_ID.test(activity.name) && !used.has(activity.name) ? activity.name : `activity_${index + 1}`;
      used.add(wanted);
      steps.push({ id: wanted, type: 'activity', run, ...(activity.retry_policy !== undefined && { retry_policy: activity.retry_policy }) });
      places.push(at);
    });
  }
  const lastActivity = steps.at(-1)?.id as string | undefined;
  const wait = input.wait_for_event;
  if (wait !== undefined) {
    const spec = typeof wait === 'string' ? { event: wait } : isObject(wait) ? { event: wait.event ?? wait.name, timeout: wait.timeout, on_timeout: wait.on_timeout } : undefined;
    if (!spec) problems.push('input.wait_for_event: must be an event name or {event, timeout?, on_timeout?}');
    else {
      steps.push({ id: 'wait_for_event', type: 'wait_for_event', ...(Object.fromEntries(Object.entries(spec).filter(([, value]) => value !== undefined)) as JsonObject) });
      places.push('input.wait_for_event');
    }
  }
  if (steps.length === 0 && problems.length === 0) problems.push('input: the inline form needs at least one activity or a wait_for_event');
  const raw = { name, steps, output: lastActivity ? `\${steps.${lastActivity}.output}` : null };
  if (problems.length === 0) {
    // Name the client's fields: steps[i].run.x -> input.activities[i].x, steps[i].x -> the place of step i.
    problems.push(
      ...definitionProblems(raw).map((problem) =>
        problem.replace(/^steps\[(\d+)\](\.run)?/, (_match, index: string) => places[Number(index)] ?? `steps[${index}]`),
      ),
    );
  }
  if (problems.length > 0) throw badRequest(problems.join('; '), { details: { problems } });
  const rest = Object.fromEntries(Object.entries(input).filter(([key]) => !INLINE_KEYS.includes(key)));
  if (!isDefinition(raw)) throw internalError(`the inline form of '${name}' passed its checks but not the DSL schema`);
  return { definition: raw, input: rest };
}
