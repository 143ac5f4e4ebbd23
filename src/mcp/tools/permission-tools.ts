import { z } from 'zod';
import { grantBody } from '../../schemas/policy-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, text, type Tool } from '../tool.js';

const VIEW = 'JSON {id, principal, action, resource, scope, when, expires_at, uses, granted_by, granted_at}';

/** Permission grants: an admin lets a principal do what the policy would refuse (never against a deny rule). */
export const permissionTools: Tool[] = [
  defineTool({
    name: 'permission_grant',
    title: 'Grant a permission',
    description:
      'Admin keys only. Let a principal (an API key name such as "ci") take an action (such as sandbox.exec) or an ' +
      'agentkernel kind (sudo_exec, sandbox_remove, sandbox_create, file_delete, network_access) on resources matching a ' +
      'glob (default "*", e.g. "sandbox:build-*") although no policy rule allows it; a deny rule still wins. scope "once" ' +
      '(default: the first request it lets through spends it), "session" (until the server stops) or "always" (kept); ' +
      'expires_in such as 30m. Returns ' + VIEW,
    inputSchema: z.strictObject(grantBody.shape),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async (args, { api, signal }) => json(await api.request({ method: 'POST', path: '/permissions/grant', body: args }, signal)),
  }),

  defineTool({
    name: 'permission_list',
    title: 'List permissions',
    description: "Live grants, oldest first, as a JSON array (every grant for an admin key, the caller's own otherwise); each is " + VIEW,
    inputSchema: z.strictObject({}),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async (_args, { api, signal }) => json(await api.request({ method: 'GET', path: '/permissions' }, signal)),
  }),

  defineTool({
    name: 'permission_revoke',
    title: 'Revoke a permission',
    description: 'Admin keys only. Revoke a grant by its id (see permission_list).',
    inputSchema: z.strictObject({ id: z.string().min(1).max(64).meta({ description: 'Grant id' }) }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ id }, { api, signal }) => text(await api.request<string>({ method: 'DELETE', path: apiPath('permissions', id) }, signal)),
  }),
];
