import { z } from 'zod';
import { createScheduleBody } from '../../schemas/schedule-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, text, type Tool } from '../tool.js';

const scheduleRef = z.string().min(1).max(100).meta({ description: 'Schedule id or name (see schedule_list)' });

const VIEW =
  'JSON {id, name, cron, fire_at, timezone, method, args, target_*, status (active, paused, completed, failed), overlap, misfire, ' +
  'end_at, next_fire_at, last_fired_at, last_run_status, fire_count, trigger_count}';

/** Schedules: cron and one-shot firings, made and watched by an assistant. */
export const scheduleTools: Tool[] = [
  defineTool({
    name: 'schedule_create',
    title: 'Create a schedule',
    description:
      'Run something at times: give cron (5 fields, or 6 with leading seconds, or @hourly/@daily/...; read in timezone, ' +
      'default UTC) or fire_at (one RFC 3339 time), and one target: method "run" with args = a sandbox_run-style body ' +
      '{command: [...], image?} (a fresh sandbox per firing); target_sandbox with method "exec" and args = {command: [...]} ' +
      '(runs in that sandbox); target_class + target_object_id with an object method; target_orchestration with method ' +
      '"start". Each occurrence fires at most once, also across server crashes. overlap "skip" (default) skips a firing ' +
      'while the previous run still runs; misfire "fire_once" (default) fires once after downtime. Returns ' + VIEW,
    inputSchema: z.strictObject(createScheduleBody.shape),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/schedules', body: args }, signal)),
  }),

  defineTool({
    name: 'schedule_list',
    title: 'List schedules',
    description: 'Every schedule, in name order, as a JSON array of schedules as schedule_create returns them.',
    inputSchema: z.strictObject({
      status: z.enum(['active', 'paused', 'completed', 'failed']).optional().meta({ description: 'Only schedules with this status' }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ status }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: '/schedules', ...(status ? { query: { status } } : {}) }, signal)),
  }),

  defineTool({
    name: 'schedule_delete',
    title: 'Delete a schedule',
    description: 'Delete a schedule and its run history; a run in flight finishes.',
    inputSchema: z.strictObject({ schedule: scheduleRef }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ schedule }, { api, signal }) =>
      text(await api.request<string>({ method: 'DELETE', path: apiPath('schedules', schedule) }, signal)),
  }),

  defineTool({
    name: 'schedule_trigger',
    title: 'Fire a schedule now',
    description:
      'Fire a schedule once now and wait for its target (up to the target\'s own timeout), also while it is paused; its ' +
      'next firing does not move. Returns the run as JSON {id, scheduled_for, status (succeeded or failed), duration_ms, ' +
      'result (e.g. an exec\'s {exit_code, stdout, stderr}), error}.',
    inputSchema: z.strictObject({ schedule: scheduleRef }),
    annotations: { destructiveHint: true, openWorldHint: true },
    handle: async ({ schedule }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('schedules', schedule, 'trigger') }, signal)),
  }),
];
