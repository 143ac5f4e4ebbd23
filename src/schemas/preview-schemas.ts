import { z } from 'zod';
import { duration, resourceName } from './common.js';

/** The port of a preview route, as the path gives it; the service says when it is not 1-65535. */
const portText = z.string({ error: 'must be a string' }).meta({ description: 'A TCP port inside the sandbox, 1-65535' });

export const previewParams = z.strictObject({ name: resourceName, port: portText });
/** The path form with a path after the port (`*` is the path at the sandbox's port). */
export const previewPathParams = z.strictObject({ name: resourceName, port: portText, '*': z.string() });
/** The host form's internal route: the port and sandbox come from the Host header. */
export const previewHostParams = z.strictObject({ port: portText, name: resourceName, '*': z.string() });

/** The sandbox's own query passes through; `exp` and `sig` are a signed URL's grant. */
export const previewQuery = z.looseObject({
  exp: z.string().optional().meta({ description: 'Expiry of a signed preview URL (Unix seconds)' }),
  sig: z.string().optional().meta({ description: 'Signature of a signed preview URL' }),
});

export const previewUrlBody = z
  .strictObject({ expires_in: duration.optional().meta({ description: 'How long the URL works; default 1h, at most 30d' }) })
  .nullish()
  .meta({ id: 'PreviewUrlRequest' });

export const previewUrl = z
  .object({
    url: z.string().meta({ description: 'Host form: http(s)://<port>-<name>.<preview domain>:<server port>/?exp=..&sig=..' }),
    path_url: z.string().meta({ description: 'Path form on the host the request came to: .../sandboxes/<name>/ports/<port>/?exp=..&sig=..' }),
    expires_at: z.string().meta({ description: 'RFC 3339' }),
  })
  .meta({ id: 'PreviewUrl' });

/** A minted preview URL: the host form, the path form, and when they stop working. */
export type PreviewUrl = z.infer<typeof previewUrl>;
