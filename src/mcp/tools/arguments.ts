import { z } from 'zod';
import { resourceName } from '../../schemas/common.js';

/** The `name` argument of every tool that acts on one sandbox. */
export const sandboxName = resourceName.meta({ description: 'Name of the sandbox, as given to sandbox_create (see sandbox_list)' });

/**
 * A file path inside a sandbox, in the forms the API takes: absolute, or relative (absolute when
 * its first name exists at the sandbox's root or is a volume's mount point, else under /workspace).
 */
export const sandboxFilePath = z
  .string({ error: 'must be a string' })
  .min(1, 'a path is required, e.g. /workspace/main.py')
  .meta({ description: 'Path inside the sandbox, e.g. /workspace/main.py; main.py means /workspace/main.py, data/x beside a volume at /data means /data/x' });

const COMMAND_ERROR = 'must be a command: one string (run with sh -c) or a non-empty array of strings (argv)';

/**
 * A command as the tools take it: an argv array run without a shell, or one string run with
 * `sh -c` (models often send a command line). Handlers get the argv either way.
 */
export const shellCommand = z
  .union([z.string({ error: COMMAND_ERROR }).min(1, COMMAND_ERROR), z.array(z.string({ error: COMMAND_ERROR })).min(1, COMMAND_ERROR)], { error: COMMAND_ERROR })
  .transform((value) => (typeof value === 'string' ? ['sh', '-c', value] : value))
  .meta({ description: 'argv array, run without a shell, e.g. ["python3", "main.py"]; or one string, run with sh -c, e.g. "cd src && make 2>&1 | tail"' });
