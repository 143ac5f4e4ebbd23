import { z } from 'zod';
import { envelope, message, resourceName } from '../../schemas/common.js';
import { ARCHIVE_BODY_LIMIT, archiveBody, archiveQuery, fileContent, RAW_BYTES_TYPE, TAR_TYPE, unpackSummary, writeFileRequest, writeFilesBody } from '../../schemas/file-schemas.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { BUFFERED_READS, STREAMED_READS } from '../../services/sandboxes/file-service.js';
import { errors, ok, sendBytes, textReply, type App, type RouteContext } from '../route-types.js';
import { onSandbox, type RouteAction } from '../route-actions.js';

const tags = ['files'];
const fileParams = z.object({
  name: resourceName,
  '*': z.string().meta({ description: 'Path inside the sandbox: absolute when its first name exists at the root or is a volume\'s mount point (etc/hosts, data/v.txt beside a volume at /data), else under /workspace (main.py); a leading slash (files//app/x) forces absolute' }),
});

/**
 * Whether a reply should be the raw bytes: the Accept header names application/octet-stream
 * with a quality above zero and not below that of an explicit application/json. Wildcards do
 * not outweigh it (a named type is more specific); JSON stays the default.
 */
export function prefersRawBytes(accept: string | undefined): boolean {
  if (!accept?.includes(RAW_BYTES_TYPE)) return false;
  let raw = 0;
  let json = -1;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((part) => part.trim());
    const qParam = params.find((param) => /^q=/i.test(param));
    const q = qParam ? Number(qParam.slice(2)) : 1;
    const quality = Number.isFinite(q) ? q : 0;
    if (type.toLowerCase() === RAW_BYTES_TYPE) raw = Math.max(raw, quality);
    else if (type.toLowerCase() === 'application/json') json = Math.max(json, quality);
  }
  return raw > 0 && raw >= json && !(json === raw && accept.indexOf('application/json') < accept.indexOf(RAW_BYTES_TYPE));
}

/**
 * The JSON envelope of a base64 file, `{"success":true,"data":{"content":...,"encoding":"base64",
 * "size":N}}`, exactly as the serializer writes it, assembled as bytes: a base64 string needs no
 * escaping, and a Buffer reply spares Fastify a scan of the string for its byte length and the
 * encoding of ~1.4 MB of text per MiB of file on the way out.
 */
export function base64Reply(content: string, size: number): Buffer {
  const head = '{"success":true,"data":{"content":"';
  const tail = `","encoding":"base64","size":${size}}}`;
  const reply = Buffer.allocUnsafe(head.length + content.length + tail.length);
  reply.write(head, 0, 'latin1');
  reply.write(content, head.length, 'latin1');
  reply.write(tail, head.length + content.length, 'latin1');
  return reply;
}

/**
 * JSON bodies of the file routes (up to 16 MiB of mostly one string) are parsed with JSON.parse
 * straight from the bytes. The app's parser (secure-json-parse) runs two regular expressions over
 * the whole text for `__proto__` and `constructor` keys, ~3 ms per MiB: here a byte search
 * looks for them first, and only a body that holds one goes through that parser, which refuses
 * it as before. An empty body is no body, as elsewhere.
 */
function addFileJsonParser(app: App): void {
  const secureJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    const text = bytes.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    if (bytes.includes('__proto__') || bytes.includes('constructor')) return secureJson(request, text, done);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}

/** Files inside running sandboxes; one file's bytes also travel raw (application/octet-stream). */
export async function fileRoutes(app: App, { services }: RouteContext): Promise<void> {
  const files = services.files;

  // In this plugin only: a raw body is the file's bytes as they came (16 MiB limit, 413 beyond).
  app.addContentTypeParser(RAW_BYTES_TYPE, { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  addFileJsonParser(app);

  app.put(
    '/sandboxes/:name/files/*',
    {
      schema: {
        tags,
        summary: 'Write a file (parent directories are created)',
        description: `JSON {content, encoding}, or the file's bytes as they are with Content-Type: ${RAW_BYTES_TYPE}.`,
        params: fileParams,
        body: writeFileRequest,
        consumes: ['application/json', RAW_BYTES_TYPE],
        response: { 200: message, ...errors(400, 403, 404, 409, 413) },
      },
    },
    async (request) => {
      const { name, '*': path } = request.params;
      const body = request.body;
      return ok(Buffer.isBuffer(body) ? await files.writeBytes(name, path, body) : await files.write(name, path, body.content, body.encoding));
    },
  );

  app.get(
    '/sandboxes/:name/files/*',
    {
      schema: {
        tags,
        summary: 'Read a file: utf8 when it is text, base64 otherwise',
        description:
          `With Accept: ${RAW_BYTES_TYPE}, the reply is the file's bytes as they are, streamed, of any size (429 while ${STREAMED_READS} such reads are under way); errors stay JSON. ` +
          `The JSON form holds the whole file: up to 64 MiB (413 beyond); ${BUFFERED_READS} run at once, others wait.`,
        params: fileParams,
        produces: ['application/json', RAW_BYTES_TYPE],
        response: { 200: envelope(fileContent), ...errors(400, 403, 404, 409, 413, 429) },
      },
    },
    async (request, reply) => {
      const { name, '*': path } = request.params;
      if (!prefersRawBytes(request.headers.accept)) {
        const file = await files.read(name, path);
        // Base64 needs no escaping: the reply is assembled as bytes, not serialised (see base64Reply).
        return file.encoding === 'base64' ? sendBytes(reply, 'application/json; charset=utf-8', base64Reply(file.content, file.size)) : ok(file);
      }
      return sendBytes(reply, RAW_BYTES_TYPE, await files.readStream(name, path));
    },
  );

  app.delete(
    '/sandboxes/:name/files/*',
    {
      schema: { tags, summary: 'Delete a file or directory', params: fileParams, response: { 200: message, ...errors(400, 403, 404, 409) } },
    },
    async (request) => ok(await files.delete(request.params.name, request.params['*'])),
  );

  // A PUT body of this type is the archive's bytes as they came.
  app.addContentTypeParser(TAR_TYPE, { parseAs: 'buffer', bodyLimit: ARCHIVE_BODY_LIMIT }, (_request, body, done) => done(null, body));

  app.get(
    '/sandboxes/:name/archive',
    {
      schema: {
        tags,
        summary: 'Pack a directory: a tar of what it holds (a copy out of the sandbox in one call)',
        description:
          `Names are relative to the directory; directories, regular files, symbolic links (as links) and FIFOs, with their permission bits and times; sockets and devices are left out. ` +
          `Packed as the sandbox's default user: 403 naming what it may not read, before the first byte. Streamed, of any size, in one of the ${STREAMED_READS} streamed reads' slots (429 beyond). One \`copied\` audit entry.`,
        params: sandboxNameParams,
        querystring: archiveQuery,
        produces: [TAR_TYPE],
        response: { 200: textReply(TAR_TYPE, 'The tar archive'), ...errors(400, 403, 404, 409, 422, 429) },
      },
    },
    async (request, reply) => sendBytes(reply, TAR_TYPE, await files.pack(request.params.name, request.query.path)),
  );

  app.put(
    '/sandboxes/:name/archive',
    {
      bodyLimit: ARCHIVE_BODY_LIMIT,
      schema: {
        tags,
        summary: 'Unpack a tar into a directory, made with its parents (a copy into the sandbox in one call)',
        description:
          `The body is the archive, Content-Type: ${TAR_TYPE}, up to ${ARCHIVE_BODY_LIMIT / 1024 / 1024} MiB (413). Unpacked as the sandbox's default user: files, links and FIFOs ` +
          'replace what is there, directories merge. Refused (400, naming the entry) and ended there: a name that is absolute or leaves the directory with `..`, ' +
          'one that would be written through a symbolic link, a device, a damaged archive, content past 64 MiB. One `copied` audit entry.',
        params: sandboxNameParams,
        querystring: archiveQuery,
        consumes: [TAR_TYPE],
        body: archiveBody,
        response: { 200: envelope(unpackSummary), ...errors(400, 403, 404, 409, 413, 415, 422) },
      },
    },
    async (request) => ok(await files.unpack(request.params.name, request.query.path, request.body)),
  );

  app.post(
    '/sandboxes/:name/files',
    {
      schema: {
        tags,
        summary: 'Write several files; a path without a leading slash resolves as in the file route (docs/files-and-volumes.md, "Paths")',
        params: sandboxNameParams,
        body: writeFilesBody,
        response: { 200: envelope(z.object({ written: z.int() })), ...errors(400, 403, 404, 409, 413) },
      },
    },
    async (request) => ok(await files.writeMany(request.params.name, request.body.files, request.body.encoding)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const fileRouteActions: Record<string, RouteAction | 'open'> = {
  'PUT /sandboxes/:name/files/*': onSandbox('sandbox.files.write'),
  'GET /sandboxes/:name/files/*': onSandbox('sandbox.files.read'),
  'DELETE /sandboxes/:name/files/*': onSandbox('sandbox.files.delete'),
  'POST /sandboxes/:name/files': onSandbox('sandbox.files.write'),
  'GET /sandboxes/:name/archive': onSandbox('sandbox.files.read'),
  'PUT /sandboxes/:name/archive': onSandbox('sandbox.files.write'),
};
