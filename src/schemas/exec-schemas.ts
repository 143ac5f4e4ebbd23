import { z } from 'zod';
import { envInput } from './common.js';

export const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;

export const command = z
  .array(z.string({ error: 'must be a non-empty array of strings' }), { error: 'must be a non-empty array of strings' })
  .min(1, 'must be a non-empty array of strings')
  .meta({ description: 'argv; no shell is involved unless you run one, e.g. ["sh","-c","echo hi"]' });

export const execBody = z
  .strictObject({
    command,
    workdir: z
      .string()
      .min(1)
      .refine((path) => path.startsWith('/'), { error: (issue) => `'${String(issue.input)}' must be an absolute path` })
      .optional()
      .meta({ description: "Working directory, absolute; default the image's (/workspace)" }),
    env: envInput.optional().meta({ description: 'Extra environment variables: {"NAME": "value"} or ["NAME=value"]' }),
    sudo: z.boolean().optional().meta({ description: 'Run as root; needs [api].allow_sudo_exec' }),
    timeout_ms: z.int().min(1).max(MAX_TIMEOUT_MS).optional().meta({ description: 'Milliseconds, default 300000 (5 min); on timeout the process tree is killed' }),
    stdin: z.string().optional().meta({ description: 'Text fed to the command on standard input' }),
  })
  .meta({ id: 'ExecRequest' });

export const execResult = z
  .object({
    output: z.string().meta({ description: 'stdout and stderr interleaved in arrival order' }),
    exit_code: z.int(),
    stdout: z.string(),
    stderr: z.string(),
    duration_ms: z.int(),
    timed_out: z.boolean(),
    truncated: z.boolean(),
    oom_killed: z
      .literal(true)
      .optional()
      .meta({ description: "Present when the kernel's OOM killer ended the command (it went past the sandbox's memory_mb); exit_code is then 137" }),
  })
  .meta({ id: 'ExecResult' });

export type ExecInput = z.infer<typeof execBody>;
export type ExecResultBody = z.infer<typeof execResult>;
