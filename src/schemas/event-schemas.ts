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
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const TYPE_ERROR = `must be one of ${EVENT_TYPES.join(', ')}`;
const eventType = z.enum(EVENT_TYPES, { error: TYPE_ERROR });

/** One event: the `data:` of GET /events and the body of a webhook delivery. */
export const sandboxEvent = z
  .object({
    id: z.int().meta({ description: 'Grows by one per event, also across restarts; the SSE `id:`' }),
    type: eventType,
    timestamp,
    sandbox: z.string().meta({ description: 'Sandbox name' }),
    sandbox_uuid: z.string(),
    labels: z.record(z.string(), z.string()),
    metadata: z.record(z.string(), z.unknown()).meta({
      description:
        'sandbox.created: image, backend, profile, vcpus, memory_mb, duration_ms; sandbox.exec.completed: command (shell-quoted, ' +
        'at most 4096 characters), duration_ms, success, exit_code, timed_out; other types: empty',
    }),
  })
  .meta({ id: 'SandboxEvent' });

export const eventsQuery = z.strictObject({
  sandbox: resourceName.optional().meta({ description: 'Only events of this sandbox (it need not exist yet)' }),
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
