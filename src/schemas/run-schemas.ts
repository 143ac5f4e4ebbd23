import { z } from 'zod';
import { imageReference, profile } from './common.js';
import { execBody } from './exec-schemas.js';

/** POST /run: the exec request fields plus the fresh sandbox's image and profile. */
export const runBody = execBody
  .extend({
    image: imageReference.optional().meta({ description: 'Container image; when omitted, chosen from the command (python3 -> the Python image, node -> the Node image, ...) or the server default' }),
    profile: profile.optional().meta({ description: 'Security profile, default moderate' }),
    fast: z
      .boolean()
      .optional()
      .meta({
        description:
          'Default true: a pristine pre-started container (read-only root; /workspace, /tmp, /var/tmp and HOME writable), reset and checked between runs; false: a sandbox created, run and removed',
      }),
  })
  .meta({ id: 'RunRequest' });

export type RunInput = z.infer<typeof runBody>;

export const MAX_BATCH_COMMANDS = 100;

/** POST /batch/run: each item is a /run request. */
export const batchBody = z
  .strictObject({
    commands: z
      .array(runBody)
      .min(1, 'must hold at least one command')
      .max(MAX_BATCH_COMMANDS, `at most ${MAX_BATCH_COMMANDS} commands per batch`),
  })
  .meta({ id: 'BatchRunRequest' });

export const batchResultItem = z.object({
  output: z.string().meta({ description: 'stdout and stderr interleaved in arrival order' }),
  error: z.string().nullable().meta({ description: 'null when the command ran (whatever its exit code); why it could not run otherwise' }),
  exit_code: z.int().nullable(),
  timed_out: z.boolean().meta({ description: 'The command was killed at its timeout (exit_code 124)' }),
  truncated: z.boolean().meta({ description: 'Output past the cap was cut' }),
  oom_killed: z.literal(true).optional().meta({ description: "Present when the kernel's OOM killer ended the command" }),
});

export const batchResult = z.object({ results: z.array(batchResultItem) }).meta({ id: 'BatchRunResult' });

export type BatchResultItem = z.infer<typeof batchResultItem>;
export type BatchRunResult = z.infer<typeof batchResult>;
