import { z } from 'zod';
import { resourceName, timestamp } from './common.js';

/** One entry of a sandbox create's `volumes` (the agentkernel SDK's field). */
export const volumeMount = z
  .strictObject({
    name: resourceName.meta({ description: 'A volume made with POST /volumes' }),
    path: z.string({ error: 'must be a string' }).min(1).max(4095).meta({ description: 'Absolute path in the sandbox, not / nor a system directory (/etc, /usr, /bin, /proc, /sys, /dev, /run, /var ...)' }),
    read_only: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'Mounted read-only (default false)' }),
  })
  .meta({ id: 'VolumeMount' });

export const volumeMounts = z.array(volumeMount).max(16, 'at most 16 volumes per sandbox');

/** The agentkernel SDK's short form of a mount, `name:/path` or `name:/path:ro`, as `docker run -v` writes it. */
export const VOLUME_MOUNT_TEXT = /^([^:]+):(\/[^:]*)(?::(ro|rw))?$/;

/** The short form read as the object form. */
const volumeMountText = z
  .string()
  .transform((text, ctx) => {
    const match = VOLUME_MOUNT_TEXT.exec(text);
    if (!match) {
      ctx.addIssue({ code: 'custom', message: `'${text}' must be name:/path or name:/path:ro` });
      return z.NEVER;
    }
    const [, name = '', path = '', mode] = match;
    const parsed = volumeMount.safeParse({ name, path, ...(mode === 'ro' ? { read_only: true } : {}) });
    // An issue of a part (`name`, `path`) keeps its path, so that the answer names the part.
    for (const issue of parsed.error?.issues ?? []) ctx.addIssue({ code: 'custom', path: issue.path, message: `${issue.message} (in '${text}')` });
    return parsed.data ?? z.NEVER;
  })
  .meta({ description: 'name:/path, or name:/path:ro for a read-only mount' });

/** A create's `volumes`: each entry the object form or its short string form. */
export const volumeMountsInput = z
  .array(z.union([volumeMount, volumeMountText], { error: 'must be an object {name, path, read_only?} or a string name:/path[:ro]' }))
  .max(16, 'at most 16 volumes per sandbox');

export const createVolumeBody = z.strictObject({ name: resourceName }).meta({ id: 'CreateVolume' });

export const volumeNameParams = z.object({ name: resourceName });

export const volume = z
  .object({
    name: z.string(),
    created_at: timestamp,
    in_use_by: z.array(z.string()).meta({ description: 'Sandboxes (running or not) that mount it; a volume in use cannot be deleted' }),
  })
  .meta({ id: 'Volume' });

export type Volume = z.infer<typeof volume>;
