import { z } from 'zod';
import { resourceName } from '../../schemas/common.js';

/** The `name` argument of every tool that acts on one sandbox. */
export const sandboxName = resourceName.meta({ description: 'Name of the sandbox, as given to sandbox_create (see sandbox_list)' });

/** An absolute file path inside a sandbox. */
export const absolutePath = z
  .string({ error: 'must be a string' })
  .regex(/^\//, 'must be an absolute path such as /workspace/main.py')
  .meta({ description: 'Absolute path inside the sandbox, e.g. /workspace/main.py' });
