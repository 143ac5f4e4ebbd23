import { z } from 'zod';
import { envelope, message } from '../../schemas/common.js';
import {
  alarmReply,
  callHeaders,
  callLogEntry,
  callLogQuery,
  callParams,
  callQuery,
  classParams,
  createObjectBody,
  defineClassBody,
  listObjectsQuery,
  objectClassDetail,
  objectClassSummary,
  objectIdParams,
  objectNameParams,
  objectView,
  patchObjectBody,
  setAlarmBody,
  verboseCallResult,
} from '../../schemas/object-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, objectByName, text, type RouteAction } from '../route-actions.js';

// Bodies that may be left out are nullish: Fastify hands a missing body to the validator as null.
const tags = ['objects'];

/** Durable objects: classes, objects, calls, alarms and call logs. */
export async function objectRoutes(app: App, { services }: RouteContext): Promise<void> {
  const { objects, objectClasses: classes } = services;

  app.get(
    '/objects/classes',
    { schema: { tags, summary: 'List object classes (without their source)', response: { 200: envelope(z.array(objectClassSummary)), ...errors() } } },
    async () => ok(await classes.list()),
  );

  app.post(
    '/objects/classes',
    {
      schema: {
        tags,
        summary: 'Register an object class, or update it (its version grows when the source or a setting changes)',
        body: defineClassBody,
        response: { 200: envelope(objectClassDetail), 201: envelope(objectClassDetail), ...errors(400, 422) },
      },
    },
    async (request, reply) => {
      const defined = await classes.define(request.body);
      return reply.status(defined.created ? 201 : 200).send(ok(defined.class));
    },
  );

  app.get(
    '/objects/classes/:class',
    { schema: { tags, summary: 'Get an object class with its source', params: classParams, response: { 200: envelope(objectClassDetail), ...errors(400, 404) } } },
    async (request) => ok(await classes.get(request.params.class)),
  );

  app.delete(
    '/objects/classes/:class',
    { schema: { tags, summary: 'Delete an object class that has no objects', params: classParams, response: { 200: message, ...errors(400, 404, 409) } } },
    async (request) => ok(await classes.delete(request.params.class)),
  );

  app.get(
    '/objects',
    { schema: { tags, summary: 'List objects', querystring: listObjectsQuery, response: { 200: envelope(z.array(objectView)), ...errors(400) } } },
    async (request) => ok(await objects.list(request.query)),
  );

  app.post(
    '/objects',
    {
      schema: {
        tags,
        summary: 'Create an object (hibernating until its first call; the class need not be registered yet)',
        body: createObjectBody,
        response: { 201: envelope(objectView), ...errors(400, 404, 409, 413) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await objects.create(request.body))),
  );

  app.get(
    '/objects/:id',
    { schema: { tags, summary: 'Get an object by id', params: objectIdParams, response: { 200: envelope(objectView), ...errors(400, 404) } } },
    async (request) => ok(await objects.get(request.params.id)),
  );

  app.patch(
    '/objects/:id',
    {
      schema: {
        tags,
        summary: 'Replace the storage and/or wake or hibernate the object now',
        params: objectIdParams,
        body: patchObjectBody,
        response: { 200: envelope(objectView), ...errors(400, 404, 409, 413, 422, 429) },
      },
    },
    async (request) => ok(await objects.patch(request.params.id, request.body)),
  );

  app.delete(
    '/objects/:id',
    { schema: { tags, summary: 'Delete an object: storage, alarm, call log and managed sandbox', params: objectIdParams, response: { 200: message, ...errors(400, 404) } } },
    async (request) => ok(await objects.delete(request.params.id)),
  );

  app.get(
    '/objects/:class/:object_id',
    { schema: { tags, summary: 'Get an object by class and object_id', params: objectNameParams, response: { 200: envelope(objectView), ...errors(400, 404) } } },
    async (request) => ok(await objects.getByName(request.params.class, request.params.object_id)),
  );

  app.post(
    '/objects/:class/:object_id/call/:method',
    {
      schema: {
        tags,
        summary: 'Call a method (the body is its arguments): creates and wakes the object as needed; data is the return value',
        params: callParams,
        querystring: callQuery,
        headers: callHeaders,
        body: z.unknown().nullish().meta({ description: "The method's arguments: any JSON; missing means {}" }),
        response: { 200: envelope(z.union([verboseCallResult, z.unknown()])), ...errors(400, 404, 409, 413, 422, 429, 503, 504) },
      },
    },
    async (request, reply) => {
      const { class: className, object_id, method } = request.params;
      const outcome = await objects.call({
        class: className,
        object_id,
        method,
        args: request.body ?? {},
        source: request.headers['x-sandboxd-client'] ?? 'http',
        ...(request.headers['idempotency-key'] ? { idempotency_key: request.headers['idempotency-key'] } : {}),
        ...(request.query.timeout_ms !== undefined ? { timeout_ms: request.query.timeout_ms } : {}),
      });
      reply.header('X-Sandboxd-Object-Id', outcome.object_id);
      reply.header('X-Sandboxd-Cold-Start', String(outcome.cold_start));
      reply.header('X-Sandboxd-Duration-Ms', String(outcome.duration_ms));
      if (outcome.replay) reply.header('Idempotent-Replay', 'true');
      if (!request.query.verbose) return ok(outcome.result);
      const { result, object_id: id, duration_ms, cold_start, logs } = outcome;
      return ok({ result, object_id: id, duration_ms, cold_start, logs });
    },
  );

  app.post(
    '/objects/:class/:object_id/alarm',
    {
      schema: {
        tags,
        summary: 'No body or {}: run the alarm method now (data is its result). {at | in_seconds, method?, args?}: set the one alarm',
        params: objectNameParams,
        body: setAlarmBody.nullish(),
        response: { 200: envelope(z.union([alarmReply, z.unknown()])), ...errors(400, 404, 409, 413, 422, 429, 503, 504) },
      },
    },
    async (request) => ok(await objects.alarmRequest(request.params.class, request.params.object_id, request.body ?? undefined)),
  );

  app.get(
    '/objects/:class/:object_id/alarm',
    { schema: { tags, summary: "The object's alarm (null when none)", params: objectNameParams, response: { 200: envelope(alarmReply), ...errors(400, 404) } } },
    async (request) => ok(await objects.alarm(request.params.class, request.params.object_id)),
  );

  app.delete(
    '/objects/:class/:object_id/alarm',
    { schema: { tags, summary: "Delete the object's alarm", params: objectNameParams, response: { 200: envelope(alarmReply), ...errors(400, 404) } } },
    async (request) => ok(await objects.deleteAlarm(request.params.class, request.params.object_id)),
  );

  app.get(
    '/objects/:class/:object_id/calls',
    {
      schema: {
        tags,
        summary: "The object's latest calls, newest first (the last 100 are kept)",
        params: objectNameParams,
        querystring: callLogQuery,
        response: { 200: envelope(z.array(callLogEntry)), ...errors(400, 404) },
      },
    },
    async (request) => ok(await objects.calls(request.params.class, request.params.object_id, request.query.limit)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const objectRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /objects/classes': { action: 'object.class.list', resource: all('object.class') },
  'POST /objects/classes': { action: 'object.class.define', resource: (i) => `object.class:${text(i.body?.name) ?? ''}` },
  'GET /objects/classes/:class': { action: 'object.class.get', resource: named('object.class', 'class') },
  'DELETE /objects/classes/:class': { action: 'object.class.delete', resource: named('object.class', 'class') },
  'GET /objects': { action: 'object.list', resource: all('object') },
  'POST /objects': { action: 'object.create', resource: (i) => `object:${text(i.body?.class) ?? ''}/${text(i.body?.object_id) ?? ''}` },
  'GET /objects/:id': { action: 'object.get', resource: named('object', 'id') },
  'PATCH /objects/:id': { action: 'object.update', resource: named('object', 'id') },
  'DELETE /objects/:id': { action: 'object.delete', resource: named('object', 'id') },
  'GET /objects/:class/:object_id': { action: 'object.get', resource: objectByName },
  'POST /objects/:class/:object_id/call/:method': { action: 'object.call', resource: objectByName },
  'POST /objects/:class/:object_id/alarm': { action: 'object.alarm', resource: objectByName },
  'GET /objects/:class/:object_id/alarm': { action: 'object.get', resource: objectByName },
  'DELETE /objects/:class/:object_id/alarm': { action: 'object.alarm', resource: objectByName },
  'GET /objects/:class/:object_id/calls': { action: 'object.get', resource: objectByName },
};
