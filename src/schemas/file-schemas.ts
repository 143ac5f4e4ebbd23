import { z } from 'zod';

export const encoding = z.enum(['utf8', 'base64'], { error: 'must be utf8 or base64' });

export const writeFileBody = z
  .strictObject({
    content: z.string({ error: 'must be a string' }),
    encoding: encoding.optional().meta({ description: 'utf8 (default) or base64' }),
  })
  .meta({ id: 'WriteFile' });

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
