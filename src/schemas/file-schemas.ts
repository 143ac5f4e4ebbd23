import { z } from 'zod';

export const encoding = z.enum(['utf8', 'base64'], { error: 'must be utf8 or base64' });

export const writeFileBody = z
  .strictObject({
    content: z.string({ error: 'must be a string' }),
    encoding: encoding.optional().meta({ description: 'utf8 (default) or base64' }),
  })
  .meta({ id: 'WriteFile' });

/** The media type of a file's bytes as they are, in a PUT body or a GET reply. */
export const RAW_BYTES_TYPE = 'application/octet-stream';

/** A PUT body sent as `application/octet-stream`: the file's bytes, unparsed. */
export const rawBytes = z.custom<Buffer>((value) => Buffer.isBuffer(value), { error: 'must be raw bytes' });

/** PUT of one file: the JSON form `{content, encoding}`, or the raw bytes. Raw comes first, so a body of bytes is never walked as an object. */
export const writeFileRequest = z.union([rawBytes, writeFileBody], {
  error: `a JSON object {content, encoding} or raw bytes with Content-Type: ${RAW_BYTES_TYPE} is required`,
});

export const writeFilesBody = z
  .strictObject({
    files: z.record(z.string().min(1), z.string({ error: 'file contents must be strings' }), {
      error: 'must be an object mapping absolute paths to contents',
    }),
    encoding: encoding.optional().meta({ description: 'Encoding of every content, utf8 (default) or base64' }),
  })
  .meta({ id: 'WriteFiles' });

export const fileContent = z
  .object({ content: z.string(), encoding, size: z.int() })
  .meta({ id: 'FileContent' });

/** The media type of a directory as an archive (GET and PUT /sandboxes/{name}/archive). */
export const TAR_TYPE = 'application/x-tar';

/** Largest archive a PUT takes: what one unpack may write (the sandbox agent's own bound). */
export const ARCHIVE_BODY_LIMIT = 64 * 1024 * 1024;

export const archiveQuery = z.strictObject({
  path: z
    .string({ error: 'must be a string' })
    .min(1, 'a directory is required, e.g. /workspace/src')
    .meta({ description: 'The directory in the sandbox; one without a leading slash resolves as in the file routes' }),
});

/** A PUT body sent as `application/x-tar`: the archive's bytes, unparsed. */
export const archiveBody = z
  .custom<Buffer>((value) => Buffer.isBuffer(value) && value.length > 0, { error: `a tar archive is required as the body, with Content-Type: ${TAR_TYPE}` })
  .meta({ type: 'string', format: 'binary' });

export const unpackSummary = z
  .object({
    path: z.string(),
    entries: z.int().meta({ description: 'Entries unpacked: files, directories, links and FIFOs' }),
    bytes: z.int().meta({ description: 'Bytes of file content written' }),
  })
  .meta({ id: 'UnpackSummary' });
