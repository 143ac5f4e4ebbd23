import { z } from 'zod';
import { PERMISSION_KIND_NAMES, PRINCIPAL_NAME_PATTERN } from '../domain/principals.js';
import { duration, labels, timestamp } from './common.js';

/** An action, or a glob of actions in a grant (`sandbox.*`). */
const ACTION_PATTERN = /^[a-z*][a-z0-9_.*]{0,63}$/;

const principalName = z
  .string({ error: 'must be a string' })
  .regex(PRINCIPAL_NAME_PATTERN, 'must be a principal name (a key name such as ci, or key-<8 hex> for an unnamed key)');
const action = z.string({ error: 'must be a string' }).regex(ACTION_PATTERN, 'must be an action such as sandbox.exec (lowercase, dots)');
const resource = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(256, 'must be at most 256 characters')
  .meta({ description: 'kind:name, e.g. sandbox:build-1; in a grant a glob (sandbox:build-*, *)' });
const kind = z.enum(PERMISSION_KIND_NAMES, { error: `must be one of ${PERMISSION_KIND_NAMES.join(', ')}` }).meta({
  description: 'agentkernel permission kind, instead of action: sudo_exec, sandbox_remove, sandbox_create, file_delete, network_access',
});

export const policyStatus = z
  .object({
    enabled: z.boolean().meta({ description: 'Whether a rule file is loaded (without one every request is allowed)' }),
    mode: z.enum(['enforce', 'audit']),
    default: z.enum(['allow', 'deny']),
    source: z.string().nullable().meta({ description: 'The rule file' }),
    version: z.string().nullable().meta({ description: 'First 12 hex digits of the SHA-256 of the rule file' }),
    rule_count: z.int(),
    loaded_at: timestamp,
    last_error: z.string().nullable().meta({ description: 'Why the last reload failed; null after a good one' }),
  })
  .meta({ id: 'PolicyStatus' });

/** What a request's context may say; a glob test in a rule's `when` reads these. */
const checkContext = z
  .strictObject({
    sudo: z.boolean().optional(),
    profile: z.string().max(64).optional(),
    image: z.string().max(256).optional(),
    command0: z.string().max(256).optional(),
    labels: labels.optional().meta({ description: "The resource's labels" }),
  })
  .meta({ description: 'The context the rules see: sudo, profile, image, command0 and the resource labels' });

export const policyCheckBody = z
  .strictObject({
    action,
    resource: resource.optional().meta({ description: 'Default *' }),
    context: checkContext.optional(),
    principal: principalName.optional().meta({ description: 'Default the caller; another principal is admin-only' }),
  })
  .meta({ id: 'PolicyCheckRequest' });

export const policyDecision = z
  .object({
    decision: z.enum(['allow', 'deny']),
    allowed: z.boolean(),
    reason: z.string(),
    matched_rules: z.array(z.string()).meta({ description: 'Ids of every rule that matched, in file order' }),
    via: z.enum(['rule', 'grant', 'default']),
    evaluation_time_us: z.number().meta({ description: 'Microseconds the decision took' }),
  })
  .meta({ id: 'PolicyDecision' });

export const policyReload = z
  .object({ reloaded: z.literal(true), version: z.string().nullable(), rule_count: z.int() })
  .meta({ id: 'PolicyReload' });

export const policyAuditQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(10_000).default(100).meta({ description: 'At most this many, newest first; default 100' }),
  decision: z.enum(['allow', 'deny'], { error: 'must be allow or deny' }).optional(),
  // `principal=` (empty) means any, as agentkernel's clients send it.
  principal: z.union([z.literal(''), principalName]).optional(),
});

export const policyAuditEntry = z
  .object({
    timestamp,
    principal: z.string(),
    action: z.string(),
    resource: z.string(),
    decision: z.enum(['allow', 'deny']),
    rule: z.string().nullable(),
    reason: z.string(),
    mode: z.enum(['enforce', 'audit']).meta({ description: 'audit: a deny that was let through' }),
  })
  .meta({ id: 'PolicyAuditEntry' });

export const grantBody = z
  .strictObject({
    principal: principalName,
    action: action.optional(),
    kind: kind.optional(),
    resource: resource.optional().meta({ description: 'Glob of resources, default *' }),
    scope: z.enum(['once', 'session', 'always'], { error: 'must be once, session or always' }).optional().meta({
      description: 'once (the first request it lets through spends it; default), session (until the server stops), always (kept)',
    }),
    expires_in: duration.optional(),
  })
  .refine((b) => b.action !== undefined || b.kind !== undefined, { message: 'give an action (such as sandbox.exec) or a kind (such as sudo_exec)', path: ['action'] })
  .meta({ id: 'GrantRequest' });

export const grant = z
  .object({
    id: z.string().meta({ description: 'Random UUID' }),
    principal: z.string(),
    action: z.string(),
    resource: z.string(),
    scope: z.enum(['once', 'session', 'always']),
    when: z.record(z.string(), z.union([z.string(), z.boolean()])).meta({ description: 'Context the request must have (sudo: true for sudo_exec)' }),
    expires_at: timestamp.nullable(),
    uses: z.int(),
    granted_by: z.string(),
    granted_at: timestamp,
  })
  .meta({ id: 'Grant' });

export const permissionParams = z.object({ id: z.string().min(1).max(64) });

export const permissionCheckBody = z
  .strictObject({
    action: action.optional(),
    kind: kind.optional(),
    resource: resource.optional(),
    principal: principalName.optional().meta({ description: 'Default the caller; another principal is admin-only' }),
  })
  .refine((b) => b.action !== undefined || b.kind !== undefined, { message: 'give an action (such as sandbox.exec) or a kind (such as sudo_exec)', path: ['action'] })
  .meta({ id: 'PermissionCheckRequest' });

export const permissionCheck = z
  .object({ permitted: z.boolean(), via: z.enum(['rule', 'grant', 'default']) })
  .meta({ id: 'PermissionCheck' });
