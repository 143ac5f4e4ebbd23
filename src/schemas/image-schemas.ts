import { z } from 'zod';
import { timestamp } from './common.js';

/** An image name as a Docker repository path component allows it, within sandboxd's 63 characters. */
const IMAGE_NAME = /^(?=.{1,63}$)[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const imageName = z
  .string({ error: 'must be a string' })
  .regex(IMAGE_NAME, 'must be lowercase letters and digits, separated by one . or _, two _ or dashes (at most 63 characters)');

export const imageNameParams = z.object({ name: imageName });

export const buildImageBody = z
  .strictObject({
    name: imageName.meta({ description: 'Built as sandboxd-user/<deployment id>/<name>:latest (a rebuild replaces it); a sandbox takes the name as its image' }),
    dockerfile: z.string({ error: 'must be a string' }).min(1).optional().meta({
      description: 'The Dockerfile; FROM only images present on the engine (nothing is pulled). Required unless `context` holds a Dockerfile',
    }),
    files: z
      .record(z.string(), z.string({ error: 'must be base64' }))
      .optional()
      .meta({ description: 'Files of the build context: relative path -> base64 content' }),
    context: z.string({ error: 'must be base64' }).optional().meta({ description: 'A build context as a base64 tar archive; `dockerfile` and `files` are added to it' }),
  })
  .meta({ id: 'BuildImage' });

export const imageView = z
  .object({
    name: z.string(),
    tag: z.string().meta({ description: 'What sandbox create takes as `image`' }),
    kind: z.enum(['catalog', 'built']).meta({ description: 'catalog: built by `sandboxd images build`; built: from a Dockerfile through POST /images' }),
    present: z.boolean(),
    id: z.string().nullable(),
    size_bytes: z.int().nullable(),
    created_at: timestamp.nullable(),
    description: z.string().nullable(),
  })
  .meta({ id: 'Image' });

export const imageBuilt = z.object({ name: z.string(), tag: z.string(), id: z.string(), size_bytes: z.int() }).meta({ id: 'BuiltImage' });

export const imageBuildView = z
  .object({
    id: z.string().meta({ description: 'The build id; what the build makes on the engine is labelled sandboxd.build=<id>' }),
    name: z.string(),
    status: z.enum(['running', 'succeeded', 'failed']).meta({ description: 'running from before the engine starts it; a build the server was stopped in is failed at the next start' }),
    error: z.string().nullable(),
    image_id: z.string().nullable(),
    started_at: timestamp,
    finished_at: timestamp.nullable(),
  })
  .meta({ id: 'ImageBuild' });

export const imageDeleted = z.object({ deleted: z.literal(true), name: z.string(), tag: z.string() });

export type ImageView = z.infer<typeof imageView>;
export type BuildImageInput = z.infer<typeof buildImageBody>;
