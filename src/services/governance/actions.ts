import type { PermissionKind } from '../../domain/principals.js';

/**
 * The actions that policy rules, grants and the route table speak of. Every route of the HTTP
 * API maps to one of them (src/http/policy-actions.ts); MCP tools go through those routes.
 */
export const ACTIONS = [
  'sandbox.create',
  'sandbox.list',
  'sandbox.get',
  'sandbox.update',
  'sandbox.delete',
  'sandbox.start',
  'sandbox.stop',
  'sandbox.exec',
  'sandbox.files.read',
  'sandbox.files.write',
  'sandbox.files.delete',
  'sandbox.browser',
  'sandbox.preview',
  'sandbox.resize',
  'sandbox.extend',
  'sandbox.recover',
  'sandbox.logs',
  'run',
  'snapshot.create',
  'snapshot.list',
  'snapshot.get',
  'snapshot.delete',
  'snapshot.restore',
  'volume.create',
  'volume.list',
  'volume.get',
  'volume.delete',
  'image.build',
  'image.list',
  'image.delete',
  'object.call',
  'object.create',
  'object.update',
  'object.delete',
  'object.list',
  'object.get',
  'object.alarm',
  'object.class.define',
  'object.class.list',
  'object.class.get',
  'object.class.delete',
  'schedule.create',
  'schedule.list',
  'schedule.get',
  'schedule.update',
  'schedule.delete',
  'schedule.trigger',
  'store.create',
  'store.list',
  'store.get',
  'store.update',
  'store.delete',
  'store.query',
  'store.execute',
  'store.command',
  'orchestration.start',
  'orchestration.list',
  'orchestration.get',
  'orchestration.event',
  'orchestration.terminate',
  'orchestration.delete',
  'orchestration.definition.list',
  'orchestration.definition.get',
  'orchestration.definition.create',
  'orchestration.definition.delete',
  'admin.gc',
  'admin.reconcile',
  'service.stats',
  'service.metrics',
  'service.openapi',
  'events.read',
  'policy.status',
  'policy.check',
  'policy.reload',
  'policy.audit',
  'permissions.list',
  'permissions.check',
  'permissions.grant',
  'permissions.revoke',
  'llm.keys.list',
  'llm.keys.set',
  'llm.keys.delete',
  'llm.usage',
  'proxy.hooks.list',
  'proxy.hooks.create',
  'proxy.hooks.delete',
  'proxy.log',
] as const;

export type Action = (typeof ACTIONS)[number];

/**
 * Actions only admin keys may take, whatever the rules and grants say (checked before the
 * rules, so that no rule or grant widens them). `policy.check` and `permissions.check` are not
 * here: a caller may ask about itself; asking about another principal is admin-only.
 */
const ADMIN_ONLY = /^(?:policy\.(?:status|reload|audit)|permissions\.(?:grant|revoke)|llm\.keys\..*|proxy\.hooks\..*)$/;

export const isAdminOnly = (action: string): boolean => ADMIN_ONLY.test(action);

/**
 * Actions only admin keys take unless a policy rule or a grant allows them to another key: a
 * policy's `default = "allow"` (and the open policy of a server without a file) does not reach
 * them. The proxy log shows what every sandbox asked for, host by host.
 */
const ADMIN_BY_DEFAULT = new Set<string>(['proxy.log']);

export const isAdminByDefault = (action: string): boolean => ADMIN_BY_DEFAULT.has(action);

/**
 * Actions an admin key reaches whatever the rules say, so that a bad rule cannot lock the
 * admins out of repairing it: they can always see the policy and load a fixed file.
 */
export const LOCKOUT_GUARDED = new Set<string>(['policy.status', 'policy.reload']);

/** agentkernel's permission kinds: the action and the context a grant of that kind covers. */
export const PERMISSION_KINDS = {
  sudo_exec: { action: 'sandbox.exec', when: { sudo: true } },
  sandbox_remove: { action: 'sandbox.delete', when: {} },
  sandbox_create: { action: 'sandbox.create', when: {} },
  file_delete: { action: 'sandbox.files.delete', when: {} },
  network_access: { action: 'sandbox.create', when: { profile: 'permissive' } },
} as const satisfies Record<PermissionKind, { action: Action; when: Record<string, string | boolean> }>;
