import { z } from 'zod';
import { sandboxNameParams } from './sandbox-schemas.js';

export const detachedStatus = z.enum(['running', 'completed', 'failed', 'killed', 'lost']).meta({
  description:
    'completed: exited 0; failed: exited non-zero; killed: ended by DELETE; lost: still running when its sandbox stopped or ' +
    'restarted, or unknown to the sandbox (its output up to then is kept where the service could collect it)',
});

export const detachedCommand = z
  .object({
    id: z.string().meta({ description: "The command's id, valid within its sandbox" }),
    sandbox: z.string(),
    command: z.array(z.string()),
    pid: z.int().meta({ description: 'Process id inside the sandbox' }),
    status: detachedStatus,
    exit_code: z.int().nullable().meta({ description: 'null while running, and for a lost command' }),
    started_at: z.string(),
    finished_at: z.string().nullable().meta({ description: 'When it ended (or was found lost); null while running' }),
  })
  .meta({ id: 'DetachedCommand' });

export const detachedParams = sandboxNameParams.extend({ id: z.string().min(1).max(64) });

export const detachedLogsQuery = z.strictObject({
  stream: z.enum(['stdout', 'stderr']).default('stdout'),
  offset: z.coerce
    .number()
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .default(0)
    .meta({ description: "Byte position in the stream to read from (a previous answer's next_offset); default 0" }),
  follow: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true')
    .meta({ description: 'true: stream the output as Server-Sent Events until the command ends' }),
});

export const detachedLogs = z
  .object({
    id: z.string(),
    stream: z.enum(['stdout', 'stderr']),
    content: z.string().meta({ description: 'What the stream printed from `offset` on (UTF-8 text); at most the last 4 MiB are kept' }),
    offset: z.int().meta({ description: "Byte position of content's first byte: the offset asked for, or later where earlier bytes were dropped" }),
    next_offset: z.int().meta({ description: 'Byte position after content: the offset of the next read' }),
    status: detachedStatus,
    stdout: z.string().meta({ description: 'The stream asked for: content; the other: its whole kept output (for clients that read both by name)' }),
    stderr: z.string().meta({ description: 'As stdout, for standard error' }),
  })
  .meta({ id: 'DetachedLogs' });

export type DetachedCommandBody = z.infer<typeof detachedCommand>;
export type DetachedLogsBody = z.infer<typeof detachedLogs>;
export type DetachedLogsQuery = z.infer<typeof detachedLogsQuery>;
