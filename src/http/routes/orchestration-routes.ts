import { envelope, message } from '../../schemas/common.js';
import {
  definition,
  definitionBody,
  definitionParams,
  eventAccepted,
  getInstanceQuery,
  instance,
  instanceDeleted,
  instanceParams,
  listInstancesQuery,
  raiseEventBody,
  startBody,
  terminateBody,
} from '../../schemas/orchestration-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

const tags = ['orchestrations'];

/** Orchestrations: definitions (the JSON DSL) and their instances, events and termination. */
export async function orchestrationRoutes(app: App, { services }: RouteContext): Promise<void> {
  const orchestrations = services.orchestrations;
  const definitions = orchestrations.definitions;

  app.get(
    '/orchestrations/definitions',
    { schema: { tags, summary: 'List orchestration definitions, in name order', response: { 200: envelope(definition.array()), ...errors() } } },
    async () => ok(await definitions.list()),
  );

  app.post(
    '/orchestrations/definitions',
    {
      schema: {
        tags,
        summary: 'Create or update an orchestration definition (201 first time, 200 update; the version moves only when the content changes)',
        description: 'Every problem of the DSL is a 400 naming its path, e.g. `steps[3].when.path: refers to step \'x\' which is not before this step`.',
        body: definitionBody,
        response: { 200: envelope(definition), 201: envelope(definition), ...errors(400) },
      },
    },
    async (request, reply) => {
      const { definition: saved, created } = await definitions.save(request.body);
      return reply.status(created ? 201 : 200).send(ok(saved));
    },
  );

  app.get(
    '/orchestrations/definitions/:name',
    { schema: { tags, summary: 'Get an orchestration definition', params: definitionParams, response: { 200: envelope(definition), ...errors(400, 404) } } },
    async (request) => ok(await definitions.get(request.params.name)),
  );

  app.delete(
    '/orchestrations/definitions/:name',
    {
      schema: { tags, summary: 'Delete an orchestration definition; running instances keep their snapshot', params: definitionParams, response: { 200: message, ...errors(400, 404) } },
    },
    async (request) => ok(await definitions.remove(request.params.name)),
  );

  app.post(
    '/orchestrations',
    {
      schema: {
        tags,
        summary: 'Start an orchestration instance (202; 200 when `id` names an existing instance of the same definition)',
        description:
          'The instance row and its first decision commit together: the answer\'s status is committed (pending with a future ' +
          'start_at, else running, waiting or completed). Unknown definition: 404; id taken by another definition: 409; input over 1 MiB: 413; ' +
          'a definition that would surely run more steps or keep more history events than an instance may: 400 naming the bound.',
        body: startBody,
        response: { 200: envelope(instance), 202: envelope(instance), ...errors(400, 404, 409, 413) },
      },
    },
    async (request, reply) => {
      const { instance: started, created } = await orchestrations.create(request.body);
      return reply.status(created ? 202 : 200).send(ok(started));
    },
  );

  app.get(
    '/orchestrations',
    {
      schema: { tags, summary: 'List orchestration instances, newest first, without history', querystring: listInstancesQuery, response: { 200: envelope(instance.array()), ...errors(400) } },
    },
    async (request) => ok(await orchestrations.list(request.query)),
  );

  app.get(
    '/orchestrations/:id',
    {
      schema: {
        tags,
        summary: 'Get an orchestration instance, with its history unless history=false',
        description:
          'One page of its steps (steps_offset, steps_limit: 1000 at most) and of its history (history_after, history_limit: 1000 at most), ' +
          'each also cut at 4 MiB of JSON; steps_next and history_next give where the next page starts (null: none left).',
        params: instanceParams,
        querystring: getInstanceQuery,
        response: { 200: envelope(instance), ...errors(400, 404) },
      },
    },
    async (request) => ok(await orchestrations.get(request.params.id, request.query)),
  );

  app.post(
    '/orchestrations/:id/events',
    {
      schema: {
        tags,
        summary: 'Raise an event (202): recorded before the answer; buffered until a wait_for_event of that name consumes it',
        params: instanceParams,
        body: raiseEventBody,
        response: { 202: envelope(eventAccepted), ...errors(400, 404, 409, 413) },
      },
    },
    async (request, reply) => reply.status(202).send(ok(await orchestrations.raiseEvent(request.params.id, request.body.name, request.body.data))),
  );

  app.post(
    '/orchestrations/:id/terminate',
    {
      schema: {
        tags,
        summary: 'Terminate an instance: open work cancelled, running activities aborted (run container removed, exec process killed)',
        params: instanceParams,
        body: terminateBody,
        response: { 200: envelope(instance), ...errors(400, 404, 409) },
      },
    },
    async (request) => ok(await orchestrations.terminate(request.params.id, request.body?.reason)),
  );

  app.delete(
    '/orchestrations/:id',
    { schema: { tags, summary: 'Delete a finished instance and its history (409 unless finished)', params: instanceParams, response: { 200: envelope(instanceDeleted), ...errors(400, 404, 409) } } },
    async (request) => ok(await orchestrations.remove(request.params.id)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const orchestrationRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /orchestrations/definitions': { action: 'orchestration.definition.list', resource: all('orchestration-definition') },
  'POST /orchestrations/definitions': { action: 'orchestration.definition.create', resource: (i) => `orchestration-definition:${text(i.body?.name) ?? ''}` },
  'GET /orchestrations/definitions/:name': { action: 'orchestration.definition.get', resource: named('orchestration-definition', 'name') },
  'DELETE /orchestrations/definitions/:name': { action: 'orchestration.definition.delete', resource: named('orchestration-definition', 'name') },
  'POST /orchestrations': { action: 'orchestration.start', resource: (i) => `orchestration-definition:${text(i.body?.name) ?? ''}` },
  'GET /orchestrations': { action: 'orchestration.list', resource: all('orchestration') },
  'GET /orchestrations/:id': { action: 'orchestration.get', resource: named('orchestration', 'id') },
  'POST /orchestrations/:id/events': { action: 'orchestration.event', resource: named('orchestration', 'id') },
  'POST /orchestrations/:id/terminate': { action: 'orchestration.terminate', resource: named('orchestration', 'id') },
  'DELETE /orchestrations/:id': { action: 'orchestration.delete', resource: named('orchestration', 'id') },
};
