import { z } from 'zod';
import { sandboxNameParams } from './sandbox-schemas.js';

export const detachedCommand = z
  .object({
    id: z.string().meta({ description: "The command's id, valid within its sandbox" }),
    sandbox: z.string(),
    command: z.array(z.string()),
    pid: z.int().meta({ description: 'Process id inside the sandbox' }),
    status: z.enum(['running', 'completed', 'failed']).meta({
      description: 'completed: exited 0; failed: exited non-zero, was killed, or was lost when the sandbox restarted',
    }),
    exit_code: z.int().nullable().meta({ description: 'null while running, or when the sandbox restarted under it' }),
    started_at: z.string(),
  })
  .meta({ id: 'DetachedCommand' });

export const detachedParams = sandboxNameParams.extend({ id: z.string().min(1).max(64) });

export const detachedLogsQuery = z.strictObject({
  stream: z.enum(['stdout', 'stderr']).default('stdout'),
});

export const detachedLogs = z
  .object({
    id: z.string(),
    stream: z.enum(['stdout', 'stderr']),
    content: z.string().meta({ description: 'The last 4 MiB the stream printed, as UTF-8 text' }),
  })
  .meta({ id: 'DetachedLogs' });

export type DetachedCommandBody = z.infer<typeof detachedCommand>;
export type DetachedLogsBody = z.infer<typeof detachedLogs>;
