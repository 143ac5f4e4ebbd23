import { envelope, message } from '../../schemas/common.js';
import {
  grant,
  grantBody,
  permissionCheck,
  permissionCheckBody,
  permissionParams,
  policyAuditEntry,
  policyAuditQuery,
  policyCheckBody,
  policyDecision,
  policyReload,
  policyStatus,
} from '../../schemas/policy-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, text, type RouteAction } from '../route-actions.js';

/** Policy (rules decided on every request) and permissions (grants an admin gives). */
export async function policyRoutes(app: App, { services }: RouteContext): Promise<void> {
  const { policy, permissions } = services;
  const tags = ['policy'];

  app.get(
    '/policy/status',
    { schema: { tags, summary: 'The policy in force (admin-only; admin keys reach it whatever the rules say)', response: { 200: envelope(policyStatus), ...errors(403) } } },
    async () => ok(policy.status()),
  );

  app.post(
    '/policy/check',
    {
      schema: {
        tags,
        summary: 'The decision a request would get, as a dry run (no grant is spent, nothing is recorded)',
        description: 'The principal defaults to the caller; asking about another principal is admin-only.',
        body: policyCheckBody,
        response: { 200: envelope(policyDecision), ...errors(400, 403) },
      },
    },
    async (request) => ok(policy.check(request.principal, request.body)),
  );

  app.post(
    '/policy/reload',
    {
      schema: {
        tags,
        summary: 'Read the rule file again (admin-only; admin keys reach it whatever the rules say)',
        description: 'An invalid file is a 400 naming the rule and the field; the previous policy stays in force.',
        response: { 200: envelope(policyReload), ...errors(400, 403) },
      },
    },
    async () => ok(policy.reload()),
  );

  app.get(
    '/policy/audit',
    {
      schema: {
        tags,
        summary: 'Recent decisions, newest first (admin-only): denials, and allows with [policy].audit_allows; the last 10,000 are kept',
        querystring: policyAuditQuery,
        response: { 200: envelope(policyAuditEntry.array()), ...errors(400, 403) },
      },
    },
    async (request) => ok(await policy.auditLog(request.query)),
  );

  const ptags = ['permissions'];
  app.get(
    '/permissions',
    { schema: { tags: ptags, summary: "Live grants, oldest first: every grant for an admin, the caller's own otherwise", response: { 200: envelope(grant.array()), ...errors(403) } } },
    async (request) => ok(permissions.list(request.principal)),
  );

  const grantSchema = {
    tags: ptags,
    description:
      'Admin-only. Lets the principal take the action on resources matching the glob although no allow rule or default allows it; ' +
      'never against a deny rule, and never an admin-only action.',
    body: grantBody,
    response: { 201: envelope(grant), ...errors(400, 403) },
  };
  app.post('/permissions/grant', { schema: { ...grantSchema, summary: 'Grant a permission (once, session or always)' } }, async (request, reply) =>
    reply.status(201).send(ok(await permissions.grant(request.principal, request.body))),
  );
  app.post('/permissions', { schema: { ...grantSchema, summary: 'Grant a permission (alias of POST /permissions/grant)' } }, async (request, reply) =>
    reply.status(201).send(ok(await permissions.grant(request.principal, request.body))),
  );

  app.delete(
    '/permissions/:id',
    { schema: { tags: ptags, summary: 'Revoke a grant (admin-only)', params: permissionParams, response: { 200: message, ...errors(403, 404) } } },
    async (request) => ok(permissions.revoke(request.principal, request.params.id)),
  );

  app.post(
    '/permissions/check',
    {
      schema: {
        tags: ptags,
        summary: 'Whether a principal may take an action on a resource, and by what (a dry run)',
        description: 'The principal defaults to the caller; asking about another principal is admin-only.',
        body: permissionCheckBody,
        response: { 200: envelope(permissionCheck), ...errors(400, 403) },
      },
    },
    async (request) => ok(policy.checkPermission(request.principal, request.body)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const policyRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /policy/status': { action: 'policy.status', resource: () => 'policy:*' },
  'POST /policy/check': { action: 'policy.check', resource: () => 'policy:*' },
  'POST /policy/reload': { action: 'policy.reload', resource: () => 'policy:*' },
  'GET /policy/audit': { action: 'policy.audit', resource: () => 'policy:*' },
  'GET /permissions': { action: 'permissions.list', resource: all('permission') },
  'POST /permissions/grant': { action: 'permissions.grant', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },
  'POST /permissions': { action: 'permissions.grant', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },
  'DELETE /permissions/:id': { action: 'permissions.revoke', resource: named('permission', 'id') },
  'POST /permissions/check': { action: 'permissions.check', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },
};
