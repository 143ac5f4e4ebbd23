import { z } from 'zod';
import { raiseEventBody, startBody } from '../../schemas/orchestration-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, type Tool } from '../tool.js';

const instanceRef = z.string().min(1).max(128).meta({ description: 'Orchestration instance id (see orchestration_list)' });

const VIEW =
  'JSON {id, name, definition_version, status (pending, running, waiting, completed, failed, terminated), input, output, error, ' +
  'failed_step, steps: [{id, type, status, attempts, output, ...}], waiting_for: [event names]}';

const DSL =
  'A definition is JSON: {name, description?, defaults?: {image, profile, timeout_ms, retry_policy}, steps: [...], output?}. Steps have ' +
  'an id (^[a-z][a-z0-9_]{0,62}$) and a type: activity with run {command, image?, env?, stdin?} (a fresh container), exec {sandbox, ' +
  'command} (an existing sandbox) or call {class, object_id, method, args} (a durable object), plus output "text"|"json" and ' +
  'retry_policy {max_attempts, initial_interval_ms, backoff_coefficient}; timer {duration: "30s"}; wait_for_event {event, timeout?, ' +
  'on_timeout}; parallel {branches: {name: [steps]}}; map {items: "${...}", step, max_concurrency}; set {value}. Any step may have ' +
  'when {path, op, value} and on_error "fail"|"continue". Expressions: "${input.x}", "${steps.<id>.output}", "${item}", "${index}".';

/** Orchestrations: durable workflows of sandboxed steps, defined and driven by an assistant. */
export const orchestrationTools: Tool[] = [
  defineTool({
    name: 'orchestration_define',
    title: 'Define an orchestration',
    description:
      `Create or update an orchestration definition (the version moves only when the content changes; running instances keep theirs). ${DSL} ` +
      'Every problem is reported with its path. Returns the definition as JSON {name, version, ...}.',
    inputSchema: z.strictObject({ definition: z.record(z.string(), z.unknown()).meta({ description: 'The definition (the DSL object, with name)' }) }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async ({ definition }, { api, signal }) => json(await api.request({ method: 'POST', path: '/orchestrations/definitions', body: definition }, signal)),
  }),

  defineTool({
    name: 'orchestration_start',
    title: 'Start an orchestration',
    description:
      'Start an instance of definition `name` with `input` (or of an inline `definition`). Give `id` to start idempotently: the ' +
      'same id again answers the existing instance. Steps run in the background and survive server restarts (activities at least ' +
      'once, object calls effectively once); poll with orchestration_get. Returns the instance as orchestration_get does.',
    inputSchema: z.strictObject(startBody.shape),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/orchestrations', body: args }, signal)),
  }),

  defineTool({
    name: 'orchestration_get',
    title: 'Get an orchestration instance',
    description: `An instance's state: ${VIEW}; with history true also its event history.`,
    inputSchema: z.strictObject({ id: instanceRef, history: z.boolean().optional().meta({ description: 'Include the history (default false here)' }) }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ id, history }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: apiPath('orchestrations', id), query: { history: history ? 'true' : 'false' } }, signal)),
  }),

  defineTool({
    name: 'orchestration_list',
    title: 'List orchestration instances',
    description: 'Instances newest first, as a JSON array of instances as orchestration_get returns them.',
    inputSchema: z.strictObject({
      status: z.enum(['pending', 'running', 'waiting', 'completed', 'failed', 'terminated']).optional().meta({ description: 'Only instances with this status' }),
      name: z.string().min(1).max(63).optional().meta({ description: 'Only instances of this definition' }),
      limit: z.int().min(1).max(1000).optional().meta({ description: 'At most this many (default 100)' }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ status, name, limit }, { api, signal }) =>
      json(
        await api.request(
          { method: 'GET', path: '/orchestrations', query: { ...(status && { status }), ...(name && { name }), ...(limit !== undefined && { limit: String(limit) }) } },
          signal,
        ),
      ),
  }),

  defineTool({
    name: 'orchestration_raise_event',
    title: 'Raise an event for an orchestration',
    description:
      'Send event `name` with `data` to an instance: a wait_for_event step of that name consumes it (an event raised before the ' +
      'wait starts is kept until then). Returns JSON {accepted, id, event, sequence}.',
    inputSchema: z.strictObject({ id: instanceRef, ...raiseEventBody.shape }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async ({ id, ...event }, { api, signal }) => json(await api.request({ method: 'POST', path: apiPath('orchestrations', id, 'events'), body: event }, signal)),
  }),

  defineTool({
    name: 'orchestration_terminate',
    title: 'Terminate an orchestration',
    description: 'Stop an instance: open steps are cancelled and running activities killed. Returns the instance as orchestration_get does.',
    inputSchema: z.strictObject({ id: instanceRef, reason: z.string().min(1).max(1000).optional().meta({ description: 'Recorded as the error' }) }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ id, reason }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('orchestrations', id, 'terminate'), body: reason ? { reason } : {} }, signal)),
  }),
];
