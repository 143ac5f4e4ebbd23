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
