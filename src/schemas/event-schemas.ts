import { z } from 'zod';
import { resourceName, timestamp } from './common.js';

/** The kinds of sandbox events, in the order a sandbox's life produces them. */
export const EVENT_TYPES = [
  'sandbox.created',
  'sandbox.started',
  'sandbox.exec.completed',
  'sandbox.stopped',
  'sandbox.resized',
  'sandbox.extended',
  'sandbox.archived',
  'sandbox.recovered',
  'sandbox.expired',
  'sandbox.deleted',
  'snapshot.created',
  'snapshot.restored',
  'snapshot.deleted',
  'object.created',
  'object.woken',
  'object.hibernated',
  'object.deleted',
  'object.alarm.failed',
  'schedule.run.failed',
  'orchestration.started',
  'orchestration.completed',
  'orchestration.failed',
  'orchestration.terminated',
  'store.created',
  'store.deleted',
  'llm.budget_exceeded',
  'policy.denied',
  'proxy.denied',
  'proxy.audited',
  'proxy.hook.created',
  'proxy.hook.deleted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const TYPE_ERROR = `must be one of ${EVENT_TYPES.join(', ')}`;
const eventType = z.enum(EVENT_TYPES, { error: TYPE_ERROR });

/** What an event not about a sandbox is about (a durable object, a schedule, a store, ...). */
export const eventResource = z
  .object({
    kind: z.string().meta({ description: 'The kind of resource, e.g. object, schedule, store, orchestration' }),
    id: z.string(),
    name: z.string(),
  })
  .meta({ id: 'EventResource', description: 'Present only on events not about a sandbox, whose `sandbox` and `sandbox_uuid` are ""' });

/** One event: the `data:` of GET /events and the body of a webhook delivery. */
export const sandboxEvent = z
  .object({
    id: z.int().meta({ description: 'Grows by one per event, also across restarts; the SSE `id:`' }),
    type: eventType.meta({ description: 'The same value as `event`, for clients that read `type`' }),
    event: eventType.meta({ description: 'The kind of event; also the SSE `event:` line and the X-Sandboxd-Event header' }),
    timestamp,
    sandbox: z.string().meta({ description: 'Sandbox name; "" for an event not about a sandbox' }),
    sandbox_uuid: z.string().meta({ description: 'Sandbox uuid; "" for an event not about a sandbox' }),
    resource: eventResource.optional(),
    labels: z.record(z.string(), z.string()),
    metadata: z.record(z.string(), z.unknown()).meta({
      description:
        'sandbox.created: image, backend, profile, vcpus, memory_mb, duration_ms; sandbox.exec.completed: command (shell-quoted, ' +
        'at most 4096 characters), duration_ms, success, exit_code, timed_out; object.*: class, object_id, and object.woken cold_start_ms, ' +
        'object.deleted status, object.alarm.failed method, fire_at, attempts, error; schedule.run.failed: run_id, scheduled_for, ' +
        'status (failed or interrupted), error; llm.budget_exceeded: budget_tokens, used_tokens; proxy.denied: method, url, host, port, reason; proxy.audited: hook, method, url, host, port (and on_response status, bytes_in, bytes_out, latency_ms, decision); proxy.hook.*: event, target; other types: empty',
    }),
  })
  .meta({ id: 'SandboxEvent' });

/**
 * One event as every consumer sees it: the `data:` of GET /events, the body of a webhook
 * delivery, what bus listeners get. `id` grows by one per event; `metadata` depends on
 * `type` (README.md). The bus sets `event` from `type`; the program reads `type`.
 */
export type SandboxEvent = z.infer<typeof sandboxEvent>;

/** What an event not about a sandbox is about. */
export type EventResource = z.infer<typeof eventResource>;

export const eventsQuery = z.strictObject({
  sandbox: resourceName
    .optional()
    .meta({ description: 'Only events of this sandbox (it need not exist yet); events not about a sandbox are left out' }),
  type: z
    .union([eventType, z.array(eventType)], { error: TYPE_ERROR })
    .optional()
    .meta({ description: 'Only events of these types; repeatable' }),
});

export const eventsHeaders = z.object({
  'last-event-id': z
    .string()
    .regex(/^[0-9]{1,16}$/, 'must be the id of an event (an integer)')
    .optional()
    .meta({ description: 'Resume after this event: the events after it that the backlog still holds come first' }),
});
