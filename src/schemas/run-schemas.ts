import { z } from 'zod';
import { profile } from './common.js';
import { execBody } from './exec-schemas.js';

/** POST /run: the exec request fields plus the fresh sandbox's image and profile. */
export const runBody = execBody
  .extend({
    image: z.string().min(1).max(255).optional().meta({ description: 'Container image; the server default when omitted' }),
    profile: profile.optional().meta({ description: 'Security profile, default moderate' }),
  })
  .meta({ id: 'RunRequest' });

export type RunInput = z.infer<typeof runBody>;
