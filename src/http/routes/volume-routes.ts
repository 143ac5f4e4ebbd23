import { z } from 'zod';
import { envelope, message } from '../../schemas/common.js';
import { createVolumeBody, volume, volumeNameParams } from '../../schemas/volume-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

const tags = ['volumes'];

/** Named volumes, mounted by sandboxes at create (`volumes` of POST /sandboxes). */
export async function volumeRoutes(app: App, { services }: RouteContext): Promise<void> {
  const volumes = services.volumes;

  app.get(
    '/volumes',
    { schema: { tags, summary: 'List volumes, with the sandboxes that mount each', response: { 200: envelope(z.array(volume)), ...errors(422) } } },
    async () => ok(await volumes.list()),
  );

  app.post(
    '/volumes',
    {
      schema: {
        tags,
        summary: 'Create a named volume: storage that outlives the sandboxes that mount it (its contents are in no snapshot)',
        body: createVolumeBody,
        response: { 201: envelope(volume), ...errors(400, 409, 422) },
      },
    },
    async (request, reply) => reply.status(201).send(ok(await volumes.create(request.body.name))),
  );

  app.get(
    '/volumes/:name',
    { schema: { tags, summary: 'Get a volume', params: volumeNameParams, response: { 200: envelope(volume), ...errors(400, 404, 422) } } },
    async (request) => ok(await volumes.get(request.params.name)),
  );

  app.delete(
    '/volumes/:name',
    {
      schema: {
        tags,
        summary: 'Delete a volume and its contents (409 while a sandbox, running or not, mounts it)',
        params: volumeNameParams,
        response: { 200: message, ...errors(400, 404, 409, 422) },
      },
    },
    async (request) => ok(await volumes.delete(request.params.name)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const volumeRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /volumes': { action: 'volume.list', resource: all('volume') },
  'POST /volumes': { action: 'volume.create', resource: (i) => `volume:${text(i.body?.name) ?? ''}` },
  'GET /volumes/:name': { action: 'volume.get', resource: named('volume', 'name') },
  'DELETE /volumes/:name': { action: 'volume.delete', resource: named('volume', 'name') },
};
