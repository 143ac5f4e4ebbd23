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
