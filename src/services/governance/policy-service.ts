import type { ConfigSection } from '../../config/config-schema.js';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { Counter } from 'prom-client';
import { parse as parseToml } from 'smol-toml';
import type { Principal } from '../../domain/principals.js';
import { badRequest, forbidden, ServiceError } from '../../errors.js';
import type { PolicyAuditRow, PolicyRepository } from '../../state/policy-repository.js';
import type { ServiceContext } from '../context.js';
import { isoNow, type Clock } from '../support/clock.js';
import { WritesInFlight } from '../support/writes-in-flight.js';
import { isAdminByDefault, isAdminOnly, LOCKOUT_GUARDED } from './actions.js';
import { actionOf, type PermissionService } from './permission-service.js';
import type { PermissionKind } from '../../domain/principals.js';
import {
  compilePolicy,
  factsOf,
  matchRules,
  OPEN_POLICY,
  PolicyFileError,
  type CompiledPolicy,
  type Facts,
  type PolicyMode,
  type PolicyRequest,
  type RequestContext,
} from './policy-rules.js';

export interface PolicyDecision {
  decision: 'allow' | 'deny';
  allowed: boolean;
  reason: string;
  matched_rules: string[];
  via: 'rule' | 'grant' | 'default';
  /** The deciding rule's id; null for a grant or the default. */
  rule: string | null;
}

export interface PolicyCheckInput {
  action: string;
  resource?: string;
  context?: RequestContext;
  /** Another principal than the caller (admin-only); its admin flag and labels are those of its key if known. */
  principal?: string;
}

/** A policy loaded from its file, or the open policy. */
interface Loaded {
  policy: CompiledPolicy;
  source: string | null;
  version: string | null;
  loadedAt: string;
}

/**
 * The policy in force: rules read from a file at start and on reload (an invalid file leaves
 * the old policy in force), a decision for every request (deny rules override everything, then
 * a live grant allows, then allow rules, then the default), audit rows, `policy.denied` events
 * and the decisions metric. The HTTP face calls `authorize` once per request, from one table
 * of route actions; MCP tools reach the same routes.
 */
export class PolicyService {
  private readonly repo: PolicyRepository;
  private readonly permissions: PermissionService;
  private readonly clock: Clock;
  private readonly audit: ServiceContext['audit'];
  /** Audit rows being written: a decision is answered before its row is kept. */
  private readonly writing = new WritesInFlight();
  private readonly logger: ServiceContext['logger'];
  private readonly decisions: Counter<'decision'>;
  private readonly settings: ConfigSection<'policy'>;
  private loaded: Loaded;
  private lastError: string | null = null;
  /** Principals of the server's keys by name: POST /policy/check about another principal uses its labels. */
  private principals = new Map<string, Principal>();

  constructor(
    ctx: Pick<ServiceContext, 'clock' | 'audit' | 'logger'> & {
      repo: PolicyRepository;
      permissions: PermissionService;
      decisions: Counter<'decision'>;
      config: ConfigSection<'policy'>;
    },
  ) {
    this.repo = ctx.repo;
    this.permissions = ctx.permissions;
    this.clock = ctx.clock;
    this.audit = ctx.audit;
    this.logger = ctx.logger;
    this.decisions = ctx.decisions;
    this.settings = ctx.config;
    this.loaded = { policy: OPEN_POLICY, source: null, version: null, loadedAt: isoNow(this.clock) };
    // A server started with a bad rule file does not start: PolicyFileError says what to fix.
    if (this.settings.policyFile) this.loaded = this.read(this.settings.policyFile);
  }

  /** Tells the service which principals exist (the HTTP face's keys). */
  knowPrincipals(principals: readonly Principal[]): void {
    this.principals = new Map(principals.map(({ name, admin, labels }) => [name, { name, admin, labels }]));
  }

  /** enforce or audit: the setting, else the file's `mode`, else enforce. */
  get mode(): PolicyMode {
    return this.settings.policyMode ?? this.loaded.policy.mode ?? 'enforce';
  }

  /** Whether a rule tests the resource's labels, image or profile, which the caller then looks up. */
  get needsResourceFacts(): boolean {
    return this.loaded.policy.needsResourceFacts;
  }

  /** GET /policy/status. */
  status() {
    const { policy, source, version, loadedAt } = this.loaded;
    return {
      enabled: source !== null,
      mode: this.mode,
      default: policy.default,
      source,
      version,
      rule_count: policy.rules.length,
      loaded_at: loadedAt,
      last_error: this.lastError,
    };
  }

  /** POST /policy/reload: reads the file again; an invalid file is a 400 naming the rule and the old policy stays. */
  reload(): { reloaded: true; version: string | null; rule_count: number } {
    if (!this.settings.policyFile) throw badRequest('no policy file is configured: start the server with --policy-file (or [policy].file)');
    try {
      this.loaded = this.read(this.settings.policyFile);
    } catch (err) {
      if (!(err instanceof PolicyFileError)) throw err;
      this.lastError = err.message;
      throw badRequest(`policy not reloaded, the previous policy stays in force: ${err.message}`);
    }
    this.lastError = null;
    this.logger.info({ version: this.loaded.version, rules: this.loaded.policy.rules.length }, 'policy reloaded');
    return { reloaded: true, version: this.loaded.version, rule_count: this.loaded.policy.rules.length };
  }

  /**
   * The decision on one request, without side effects but a `once` grant's consumption (with
   * `consume`). A grant is consulted only when no deny rule matches and neither an allow rule
   * nor the default would allow: it is used (and a `once` grant spent) only where it matters.
   * `adminByDefault` (an admin-by-default action of a non-admin key): an `allow` default does
   * not apply, only an allow rule or a grant.
   */
  decide(request: PolicyRequest, consume: boolean, adminByDefault = false): PolicyDecision {
    const { policy } = this.loaded;
    const { deny, allow, matched } = matchRules(policy, request);
    if (deny) return { decision: 'deny', allowed: false, reason: deny.reason ?? 'a deny rule matches', matched_rules: matched, via: 'rule', rule: deny.id };
    if (allow) return { decision: 'allow', allowed: true, reason: allow.reason ?? 'an allow rule matches', matched_rules: matched, via: 'rule', rule: allow.id };
    if (policy.default === 'allow' && !adminByDefault) return { decision: 'allow', allowed: true, reason: 'the default is allow', matched_rules: matched, via: 'default', rule: null };
    const grant = this.permissions.use(request, consume);
    if (grant) return { decision: 'allow', allowed: true, reason: `permission ${grant.id} (${grant.scope})`, matched_rules: matched, via: 'grant', rule: null };
    const reason = adminByDefault ? `${request.action} is admin-only unless a policy rule or a grant allows it` : 'no rule allows it and the default is deny';
    return { decision: 'deny', allowed: false, reason, matched_rules: matched, via: 'default', rule: null };
  }

  /**
   * Lets a request through or throws: FORBIDDEN for an admin-only action of a non-admin key
   * (before any rule, so no rule or grant widens it) and for an admin-by-default one that no
   * rule or grant allows it, POLICY_DENIED for a denial in enforce mode. Admin keys always reach GET /policy/status and POST /policy/reload, so that a bad
   * rule cannot lock them out of repairing it.
   */
  authorize(principal: Principal, action: string, resource: string, context: RequestContext): void {
    if (isAdminOnly(action) && !principal.admin) throw forbidden(`${action} is admin-only: key '${principal.name}' is not an admin key`);
    if (principal.admin && LOCKOUT_GUARDED.has(action)) return;
    const adminByDefault = !principal.admin && isAdminByDefault(action);
    const { policy } = this.loaded;
    if (policy.rules.length === 0 && policy.default === 'allow' && !adminByDefault && !this.settings.policyAuditAllows) {
      this.decisions.inc({ decision: 'allow' });
      return;
    }
    const request = { principal: principal.name, action, resource, facts: factsOf(context, principal) };
    const decision = this.decide(request, true, adminByDefault);
    const mode = this.mode;
    if (decision.allowed) {
      this.decisions.inc({ decision: 'allow' });
      if (this.settings.policyAuditAllows) this.record(request, decision, mode);
      return;
    }
    // Not a rule's denial but the action's nature: refused in audit mode too, as admin-only actions are.
    if (adminByDefault && decision.via === 'default') {
      this.decisions.inc({ decision: 'deny' });
      throw forbidden(`${action} is admin-only unless a policy rule or a grant allows it: key '${principal.name}' is not an admin key`);
    }
    this.decisions.inc({ decision: mode === 'enforce' ? 'deny' : 'audit_deny' });
    this.record(request, decision, mode);
    const message = `policy denied ${action} on ${resource} for key '${principal.name}': ${decision.reason}${decision.rule ? ` (rule ${decision.rule})` : ''}`;
    this.audit.resourceEvent('policy.denied', resourceOf(resource), {
      principal: principal.name,
      action,
      resource,
      rule: decision.rule,
      reason: decision.reason,
      mode,
    });
    if (mode === 'enforce') throw new ServiceError('POLICY_DENIED', message, { details: { action, resource, principal: principal.name, rule: decision.rule } });
    this.logger.warn({ principal: principal.name, action, resource, rule: decision.rule }, `audit mode, let through: ${message}`);
  }

  /** POST /policy/check: the decision a request would get, as a dry run (no grant is spent, nothing recorded). */
  check(caller: Principal, input: PolicyCheckInput) {
    if (input.principal !== undefined && input.principal !== caller.name && !caller.admin) {
      throw forbidden(`principal: asking about another principal is admin-only: key '${caller.name}' is not an admin key`);
    }
    const principal = input.principal === undefined ? caller : (this.principals.get(input.principal) ?? { name: input.principal, admin: false, labels: {} });
    const started = process.hrtime.bigint();
    const request = { principal: principal.name, action: input.action, resource: input.resource ?? '*', facts: factsOf(input.context ?? {}, principal) };
    let decision: PolicyDecision;
    if (isAdminOnly(input.action) && !principal.admin) {
      decision = { decision: 'deny', allowed: false, reason: `${input.action} is admin-only`, matched_rules: [], via: 'default', rule: null };
    } else if (principal.admin && LOCKOUT_GUARDED.has(input.action)) {
      decision = { decision: 'allow', allowed: true, reason: 'admin keys always reach it', matched_rules: [], via: 'default', rule: null };
    } else {
      decision = this.decide(request, false, !principal.admin && isAdminByDefault(input.action));
    }
    const { rule: _rule, ...shown } = decision;
    return { ...shown, evaluation_time_us: Number(process.hrtime.bigint() - started) / 1000 };
  }

  /**
   * POST /permissions/check: whether a principal may take an action (or an agentkernel kind,
   * with the context it implies) on a resource, and by what: a dry run like `check`.
   */
  checkPermission(caller: Principal, input: { action?: string; kind?: PermissionKind; resource?: string; principal?: string }) {
    const { action, when } = actionOf(input);
    const context = { ...(when.sudo === true ? { sudo: true } : {}), ...(typeof when.profile === 'string' ? { profile: when.profile } : {}) };
    const result = this.check(caller, {
      action,
      context,
      ...(input.resource !== undefined ? { resource: input.resource } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
    });
    return { permitted: result.allowed, via: result.via };
  }

  /**
   * GET /policy/audit: newest first; an empty principal means any. The decisions this server has
   * made are in it: their rows, written after the answer, are awaited first (on PostgreSQL a
   * read may otherwise overtake them on another connection).
   */
  async auditLog(filter: { limit: number; decision?: 'allow' | 'deny'; principal?: string }) {
    await this.writing.settled();
    return this.repo.audit(filter);
  }

  private record(request: { principal: string; action: string; resource: string; facts: Facts }, decision: PolicyDecision, mode: PolicyMode): void {
    const row: PolicyAuditRow = {
      timestamp: isoNow(this.clock),
      principal: request.principal,
      action: request.action,
      resource: request.resource,
      decision: decision.decision,
      rule: decision.rule,
      reason: decision.reason,
      mode,
    };
    this.writing
      .track(this.repo.appendAudit(row))
      .catch((err: unknown) => this.logger.error({ err, action: row.action }, 'a policy decision was not kept in the audit'));
  }

  /** Reads and compiles the rule file; PolicyFileError (naming the file) for anything unusable. */
  private read(file: string): Loaded {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new PolicyFileError(`cannot read policy file ${file}: ${(err as Error).message}`);
    }
    const extension = extname(file).toLowerCase();
    let document: unknown;
    try {
      if (extension === '.toml') document = parseToml(text);
      else if (extension === '.json') document = JSON.parse(text);
      else throw new PolicyFileError(`policy file ${file}: the name must end in .toml or .json`);
    } catch (err) {
      if (err instanceof PolicyFileError) throw err;
      throw new PolicyFileError(`policy file ${file} is not valid ${extension === '.toml' ? 'TOML' : 'JSON'}: ${(err as Error).message}`);
    }
    let policy: CompiledPolicy;
    try {
      policy = compilePolicy(document);
    } catch (err) {
      if (err instanceof PolicyFileError) throw new PolicyFileError(`policy file ${file}: ${err.message}`);
      throw err;
    }
    const version = createHash('sha256').update(text).digest('hex').slice(0, 12);
    return { policy, source: file, version, loadedAt: isoNow(this.clock) };
  }
}

/** `sandbox:build-1` as an event's resource: kind sandbox, id and name build-1. */
function resourceOf(resource: string): { kind: string; id: string; name: string } {
  const colon = resource.indexOf(':');
  if (colon < 0) return { kind: resource, id: '', name: '' };
  const rest = resource.slice(colon + 1);
  return { kind: resource.slice(0, colon), id: rest, name: rest };
}
