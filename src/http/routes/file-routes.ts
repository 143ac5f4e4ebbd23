import { z } from 'zod';
import { envelope, message, resourceName } from '../../schemas/common.js';
import { fileContent, writeFileBody, writeFilesBody } from '../../schemas/file-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';

const tags = ['files'];
const fileParams = z.object({
  name: resourceName,
  '*': z.string().meta({ description: 'Absolute path inside the sandbox, e.g. workspace/a.py for /workspace/a.py' }),
});

/** Files inside running sandboxes. */
export async function fileRoutes(app: App, { services }: RouteContext): Promise<void> {
  const files = services.files;

  app.put(
    '/sandboxes/:name/files/*',
    {
      schema: {
        tags,
        summary: 'Write a file (parent directories are created)',
        params: fileParams,
        body: writeFileBody,
        response: { 200: message, ...errors(400, 403, 404, 409, 413) },
      },
    },
    async (request) => ok(await files.write(request.params.name, `/${request.params['*']}`, request.body.content, request.body.encoding)),
  );

  app.get(
    '/sandboxes/:name/files/*',
    {
      schema: {
        tags,
        summary: 'Read a file: utf8 when it is text, base64 otherwise',
        params: fileParams,
        response: { 200: envelope(fileContent), ...errors(400, 403, 404, 409) },
      },
    },
    async (request) => ok(await files.read(request.params.name, `/${request.params['*']}`)),
  );

  app.delete(
    '/sandboxes/:name/files/*',
    {
      schema: { tags, summary: 'Delete a file or directory', params: fileParams, response: { 200: message, ...errors(400, 403, 404, 409) } },
    },
    async (request) => ok(await files.delete(request.params.name, `/${request.params['*']}`)),
  );

  app.post(
    '/sandboxes/:name/files',
    {
      schema: {
        tags,
        summary: 'Write several files; relative paths are taken from /workspace',
        params: sandboxNameParams,
        body: writeFilesBody,
        response: { 200: envelope(z.object({ written: z.int() })), ...errors(400, 403, 404, 409, 413) },
      },
    },
    async (request) => ok(await files.writeMany(request.params.name, request.body.files, request.body.encoding)),
  );
}
