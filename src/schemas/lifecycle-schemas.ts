import { z } from 'zod';
import { duration, timestamp } from './common.js';

const positiveInt = z.int({ error: 'must be an integer' });

export const resizeBody = z
  .strictObject({
    vcpus: positiveInt.min(1, 'must be at least 1').optional().meta({ description: 'CPU cores' }),
    memory_mb: positiveInt.min(32, 'must be at least 32').optional().meta({ description: 'Memory limit in MiB' }),
  })
  .refine((body) => body.vcpus !== undefined || body.memory_mb !== undefined, { message: 'give vcpus, memory_mb or both' })
  .meta({ id: 'ResizeSandbox' });

export const extendBody = z
  .strictObject({ by: duration.optional().meta({ description: 'How much longer, default 1h (30m, 2h, 1d)' }) })
  .meta({ id: 'ExtendSandbox' });

export const extendResult = z
  .object({ expires_at: timestamp.nullable().meta({ description: 'The new expiry; null for a sandbox without one, which extend leaves without one' }) })
  .meta({ id: 'ExtendResult' });

export const gcResult = z
  .object({ removed: z.array(z.string()), count: z.int() })
  .meta({ id: 'GcResult', description: 'Sandboxes removed because their expires_at passed' });

export const reconcileBody = z
  .strictObject({ dry_run: z.boolean({ error: 'must be a boolean' }).optional().meta({ description: 'Only preview the actions' }) })
  .meta({ id: 'Reconcile' });

export const reconcileResult = z
  .object({
    dry_run: z.boolean(),
    actions: z.array(
      z.object({
        sandbox: z.string(),
        action: z.enum(['stop', 'archive', 'delete']),
        reason: z.string().meta({ description: 'Which threshold was passed, and by how much' }),
      }),
    ),
    stopped: z.array(z.string()),
    archived: z.array(z.string()),
    removed: z.array(z.string()),
  })
  .meta({ id: 'ReconcileResult' });

export type ResizeInput = z.infer<typeof resizeBody>;
export type ReconcileResult = z.infer<typeof reconcileResult>;
