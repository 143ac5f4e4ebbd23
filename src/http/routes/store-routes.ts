import { envelope, message } from '../../schemas/common.js';
import {
  commandBody,
  commandResult,
  createStoreBody,
  executeBody,
  executeResult,
  listStoresQuery,
  patchStoreBody,
  queryBody,
  queryResult,
  store,
  storeParams,
} from '../../schemas/store-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

const tags = ['stores'];

/** Durable stores: SQL and command stores on the host or on external servers, behind one API. */
export async function storeRoutes(app: App, { services }: RouteContext): Promise<void> {
  const stores = services.stores;

  app.get(
    '/stores',
    {
      schema: { tags, summary: 'List stores, in name order', querystring: listStoresQuery, response: { 200: envelope(store.array()), ...errors(400) } },
    },
    async (request) => ok(await stores.list(request.query)),
  );

  app.post(
    '/stores',
    {
      schema: {
        tags,
        summary: 'Create a store: sqlite, kv or queue on the host; postgres, mysql or redis on a server',
        description:
          'config.password is write-only (encrypted at rest; views show password_set: true and a url with ****); config.password_env ' +
          'names a server environment variable read at connect. With validate (default true) the store is reached once before the ' +
          'answer. Unknown kind or bad config: 400 naming the field; unknown sandbox: 404; duplicate name: 409.',
        body: createStoreBody,
        response: { 201: envelope(store), ...errors(400, 404, 409, 422, 503) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await stores.create(request.body))),
  );

  app.get(
    '/stores/:id',
    { schema: { tags, summary: 'Get a store by id or name', params: storeParams, response: { 200: envelope(store), ...errors(400, 404) } } },
    async (request) => ok(await stores.get(request.params.id)),
  );

  app.patch(
    '/stores/:id',
    {
      schema: {
        tags,
        summary: "Change a store's config (merged; null removes a field; a new password replaces the kept one)",
        params: storeParams,
        body: patchStoreBody,
        response: { 200: envelope(store), ...errors(400, 404, 422) },
      },
    },
    async (request) => ok(await stores.update(request.params.id, request.body)),
  );

  app.delete(
    '/stores/:id',
    {
      schema: {
        tags,
        summary: "Delete a store: a host store's file goes with it; an external server's data is never touched",
        params: storeParams,
        response: { 200: message, ...errors(400, 404) },
      },
    },
    async (request) => ok(await stores.remove(request.params.id)),
  );

  app.post(
    '/stores/:id/query',
    {
      schema: {
        tags,
        summary: 'Run a read-only statement (sqlite, postgres, mysql): rows as arrays, at most max_rows',
        description: 'Read-only by the engine (read-only connection or transaction): a statement that writes is 400 READ_ONLY.',
        params: storeParams,
        body: queryBody,
        response: { 200: envelope(queryResult), ...errors(400, 404, 409, 422, 503, 504) },
      },
    },
    async (request) => ok(await stores.query(request.params.id, request.body)),
  );

  app.post(
    '/stores/:id/execute',
    {
      schema: {
        tags,
        summary: 'Run a statement that writes, or a batch of them (in one transaction by default)',
        params: storeParams,
        body: executeBody,
        response: { 200: envelope(executeResult), ...errors(400, 403, 404, 409, 413, 422, 503, 504) },
      },
    },
    async (request) => ok(await stores.execute(request.params.id, request.body)),
  );

  app.post(
    '/stores/:id/command',
    {
      schema: {
        tags,
        summary: 'Run a command of a kv, queue or redis store, e.g. ["SET", "k", "v"]',
        params: storeParams,
        body: commandBody,
        response: { 200: envelope(commandResult), ...errors(400, 403, 404, 413, 422, 503, 504) },
      },
    },
    async (request) => ok(await stores.command(request.params.id, request.body)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const storeRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /stores': { action: 'store.list', resource: all('store') },
  'POST /stores': { action: 'store.create', resource: (i) => `store:${text(i.body?.name) ?? ''}` },
  'GET /stores/:id': { action: 'store.get', resource: named('store', 'id') },
  'PATCH /stores/:id': { action: 'store.update', resource: named('store', 'id') },
  'DELETE /stores/:id': { action: 'store.delete', resource: named('store', 'id') },
  'POST /stores/:id/query': { action: 'store.query', resource: named('store', 'id') },
  'POST /stores/:id/execute': { action: 'store.execute', resource: named('store', 'id') },
  'POST /stores/:id/command': { action: 'store.command', resource: named('store', 'id') },
};
