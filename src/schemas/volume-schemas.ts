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
