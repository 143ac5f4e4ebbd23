import { z } from 'zod';
import { duration } from '../../schemas/common.js';
import { resizeBody } from '../../schemas/lifecycle-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';

/** A sandbox's time to live, size and archive state. */
export const lifecycleTools: Tool[] = [
  defineTool({
    name: 'sandbox_extend_ttl',
    title: 'Extend a sandbox\'s time to live',
    description:
      'Push back when a sandbox expires (sandboxes created with a ttl are removed once expires_at passes). The new ' +
      'expiry is max(expires_at, now) + by. A sandbox without an expiry keeps none (it never expires) and the answer is ' +
      '{"expires_at": null}. Returns {"expires_at": "<RFC 3339 time>"}.',
    inputSchema: z.strictObject({
      name: sandboxName,
      by: duration.optional().meta({ description: 'How much longer: <integer><s|m|h|d>, e.g. 30m, 2h, 1d; default 1h' }),
    }),
    annotations: { idempotentHint: false, destructiveHint: false, openWorldHint: false },
    handle: async ({ name, by }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'extend'), body: by ? { by } : {} }, signal)),
  }),

  defineTool({
    name: 'sandbox_resize',
    title: 'Resize a sandbox',
    description:
      'Change a sandbox\'s CPU and memory limits. A running sandbox is resized in place (not possible under the ' +
      'restrictive profile\'s gVisor runtime: stop it first); a stopped one gets them at its next start. Returns the sandbox as JSON.',
    // The shape only: the API itself refuses a resize that names neither limit.
    inputSchema: z.strictObject({ name: sandboxName, ...resizeBody.shape }),
    annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
    capability: 'resize',
    handle: async ({ name, ...size }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'resize'), body: size }, signal)),
  }),

  defineTool({
    name: 'sandbox_recover',
    title: 'Recover an archived sandbox',
    description:
      'Bring back a sandbox that a lifecycle policy archived (status "archived"): it becomes "stopped" with its files; ' +
      'then sandbox_start it. Fails for a sandbox that is not archived. Returns the sandbox as JSON.',
    inputSchema: z.strictObject({ name: sandboxName }),
    annotations: { idempotentHint: false, destructiveHint: false, openWorldHint: false },
    handle: async ({ name }, { api, signal }) =>
      json(await api.request({ method: 'POST', path: apiPath('sandboxes', name, 'recover') }, signal)),
  }),
];
