import { z } from 'zod';
import { envelope, message } from '../../schemas/common.js';
import { sandboxDetail } from '../../schemas/sandbox-schemas.js';
import { createSnapshotBody, restoreSnapshotBody, snapshot, snapshotNameParams } from '../../schemas/snapshot-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

// Bodies that may be left out are nullish: Fastify hands a missing body to the validator as null.
const tags = ['snapshots'];

/** Snapshots of sandboxes and their restore as new sandboxes. */
export async function snapshotRoutes(app: App, { services }: RouteContext): Promise<void> {
  const snapshots = services.snapshots;

  app.get(
    '/snapshots',
    { schema: { tags, summary: 'List snapshots', response: { 200: envelope(z.array(snapshot)), ...errors() } } },
    async () => ok(await snapshots.list()),
  );

  app.post(
    '/snapshots',
    {
      schema: {
        tags,
        summary: "Snapshot a sandbox's whole filesystem and settings (it may keep running)",
        body: createSnapshotBody,
        response: { 201: envelope(snapshot), ...errors(400, 404, 409, 422) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await snapshots.create(request.body))),
  );

  app.get(
    '/snapshots/:name',
    { schema: { tags, summary: 'Get a snapshot', params: snapshotNameParams, response: { 200: envelope(snapshot), ...errors(400, 404) } } },
    async (request) => ok(await snapshots.get(request.params.name)),
  );

  app.delete(
    '/snapshots/:name',
    { schema: { tags, summary: 'Delete a snapshot and its image', params: snapshotNameParams, response: { 200: message, ...errors(400, 404) } } },
    async (request) => ok(await snapshots.delete(request.params.name)),
  );

  app.post(
    '/snapshots/:name/restore',
    {
      schema: {
        tags,
        summary: 'Restore a snapshot as a new running sandbox (as_name, default <sandbox>-restored)',
        params: snapshotNameParams,
        body: restoreSnapshotBody.nullish(),
        response: { 201: envelope(sandboxDetail), ...errors(400, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await snapshots.restore(request.params.name, request.body?.as_name))),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const snapshotRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /snapshots': { action: 'snapshot.list', resource: all('snapshot') },
  'POST /snapshots': { action: 'snapshot.create', resource: (i) => `snapshot:${text(i.body?.name) ?? ''}`, sandbox: (i) => text(i.body?.sandbox) ?? '' },
  'GET /snapshots/:name': { action: 'snapshot.get', resource: named('snapshot', 'name') },
  'DELETE /snapshots/:name': { action: 'snapshot.delete', resource: named('snapshot', 'name') },
  'POST /snapshots/:name/restore': { action: 'snapshot.restore', resource: named('snapshot', 'name') },
};
