import { envelope, message } from '../../schemas/common.js';
import {
  createScheduleBody,
  listRunsQuery,
  listSchedulesQuery,
  patchScheduleBody,
  schedule,
  scheduleParams,
  scheduleRun,
} from '../../schemas/schedule-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

const tags = ['schedules'];

/** Schedules: cron and one-shot firings of objects, orchestrations, sandbox commands and runs. */
export async function scheduleRoutes(app: App, { services }: RouteContext): Promise<void> {
  const schedules = services.schedules;

  app.get(
    '/schedules',
    {
      schema: {
        tags,
        summary: 'List schedules, in name order',
        querystring: listSchedulesQuery,
        response: { 200: envelope(schedule.array()), ...errors(400) },
      },
    },
    async (request) => ok(await schedules.list(request.query)),
  );

  app.post(
    '/schedules',
    {
      schema: {
        tags,
        summary: 'Create a schedule: cron or fire_at, and one target (object method, orchestration, sandbox exec, or a /run)',
        description:
          'Fires at most once per occurrence, also across a kill -9 (the claim commits before the target runs; a run in flight ' +
          'at a crash is recorded interrupted and not fired again, except an object method, retried once with the same ' +
          'Idempotency-Key). Unknown class, definition or sandbox: 404; duplicate name: 409.',
        body: createScheduleBody,
        response: { 201: envelope(schedule), ...errors(400, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await schedules.create(request.body))),
  );

  const getSchema = { tags, params: scheduleParams, response: { 200: envelope(schedule), ...errors(400, 404) } };
  app.get('/schedules/:id', { schema: { ...getSchema, summary: 'Get a schedule by id or name' } }, async (request) =>
    ok(await schedules.get(request.params.id)),
  );
  app.get('/schedules/:id/status', { schema: { ...getSchema, summary: 'Get a schedule by id or name (alias of GET /schedules/{id})' } }, async (request) =>
    ok(await schedules.get(request.params.id)),
  );

  app.patch(
    '/schedules/:id',
    {
      schema: {
        tags,
        summary: 'Pause, resume (from now) or change a schedule; next_fire_at is recomputed',
        params: scheduleParams,
        body: patchScheduleBody,
        response: { 200: envelope(schedule), ...errors(400, 403, 404, 409) },
      },
    },
    async (request) => ok(await schedules.update(request.params.id, request.body)),
  );

  app.delete(
    '/schedules/:id',
    {
      schema: { tags, summary: 'Delete a schedule and its runs (a run in flight finishes)', params: scheduleParams, response: { 200: message, ...errors(400, 404) } },
    },
    async (request) => ok(await schedules.remove(request.params.id)),
  );

  app.post(
    '/schedules/:id/trigger',
    {
      schema: {
        tags,
        summary: "Fire now and wait for the target (up to its own timeout); next_fire_at does not move; allowed while paused",
        params: scheduleParams,
        response: { 200: envelope(scheduleRun), ...errors(400, 404) },
      },
    },
    async (request) => ok(await schedules.trigger(request.params.id)),
  );

  app.get(
    '/schedules/:id/runs',
    {
      schema: {
        tags,
        summary: "A schedule's runs, newest first (the last 100 are kept)",
        params: scheduleParams,
        querystring: listRunsQuery,
        response: { 200: envelope(scheduleRun.array()), ...errors(400, 404) },
      },
    },
    async (request) => ok(await schedules.runs(request.params.id, request.query)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const scheduleRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /schedules': { action: 'schedule.list', resource: all('schedule') },
  'POST /schedules': { action: 'schedule.create', resource: (i) => `schedule:${text(i.body?.name) ?? ''}` },
  'GET /schedules/:id': { action: 'schedule.get', resource: named('schedule', 'id') },
  'GET /schedules/:id/status': { action: 'schedule.get', resource: named('schedule', 'id') },
  'PATCH /schedules/:id': { action: 'schedule.update', resource: named('schedule', 'id') },
  'DELETE /schedules/:id': { action: 'schedule.delete', resource: named('schedule', 'id') },
  'POST /schedules/:id/trigger': { action: 'schedule.trigger', resource: named('schedule', 'id') },
  'GET /schedules/:id/runs': { action: 'schedule.get', resource: named('schedule', 'id') },
};
