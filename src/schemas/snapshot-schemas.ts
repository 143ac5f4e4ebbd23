import { z } from 'zod';
import { profile, resourceName, timestamp } from './common.js';

export const snapshotNameParams = z.object({ name: resourceName });

export const createSnapshotBody = z
  .strictObject({
    sandbox: resourceName.meta({ description: 'Source sandbox' }),
    name: resourceName.meta({ description: 'Snapshot name' }),
  })
  .meta({ id: 'CreateSnapshot' });

export const restoreSnapshotBody = z
  .strictObject({ as_name: resourceName.optional().meta({ description: 'Name of the new sandbox, default <sandbox>-restored' }) })
  .meta({ id: 'RestoreSnapshot' });

export const snapshot = z
  .object({
    name: z.string(),
    sandbox: z.string().meta({ description: 'Source sandbox name' }),
    image_tag: z.string().meta({ description: '<prefix>:<name>' }),
    backend: z.string(),
    base_image: z.string(),
    vcpus: z.int(),
    memory_mb: z.int(),
    disk_mb: z.int().optional().meta({ description: "The sandbox's disk_mb, which a restore gives back" }),
    profile,
    created_at: timestamp,
    note: z.string().optional().meta({ description: 'What the snapshot does not hold: the contents of the named volumes its sandbox mounted (they live on in the volumes)' }),
  })
  .meta({ id: 'Snapshot' });

export type CreateSnapshotInput = z.infer<typeof createSnapshotBody>;
export type SnapshotView = z.infer<typeof snapshot>;
