import { randomUUID } from 'node:crypto';
import type { PermissionKind, Principal } from '../../domain/principals.js';
import { badRequest, forbidden, notFound } from '../../errors.js';
import type { PermissionRow, PolicyRepository } from '../../state/policy-repository.js';
import type { ServiceContext } from '../context.js';
import { isoNow, type Clock } from '../support/clock.js';
import { parseDuration } from '../support/durations.js';
import { isAdminOnly, PERMISSION_KINDS } from './actions.js';
import { compileGlobs, type Facts, type PolicyRequest } from './policy-rules.js';

export type GrantScope = 'once' | 'session' | 'always';

/** A grant as the API shows it. */
export interface Grant {
  id: string;
  principal: string;
  action: string;
  resource: string;
  scope: GrantScope;
  /** Context values the request must have (a sudo_exec grant covers sudo execs). */
  when: Record<string, string | boolean>;
  expires_at: string | null;
  uses: number;
  granted_by: string;
  granted_at: string;
}

export interface GrantInput {
  principal: string;
  action?: string;
  kind?: PermissionKind;
  resource?: string;
  scope?: GrantScope;
  expires_in?: string;
}

/** The action and context conditions named by an `action` or an agentkernel `kind`. */
export function actionOf(input: { action?: string; kind?: PermissionKind }): { action: string; when: Record<string, string | boolean> } {
  if (input.kind) {
    const kind = PERMISSION_KINDS[input.kind];
    if (input.action && input.action !== kind.action) throw badRequest(`action: '${input.action}' contradicts kind '${input.kind}' (which means ${kind.action})`);
    return { action: kind.action, when: { ...kind.when } };
  }
  if (!input.action) throw badRequest('action: give an action (such as sandbox.exec) or a kind (such as sudo_exec)');
  return { action: input.action, when: {} };
}

interface LiveGrant extends Grant {
  actionPattern: RegExp;
  resourcePattern: RegExp;
}

/**
 * Permission grants: an admin lets a principal take an action on resources (a glob) that the
 * rules' allows or the default would refuse, never one a deny rule refuses. `once` grants are
 * consumed by the first request they let through; `once` and `session` grants live in memory
 * (a restart ends them); `always` grants are kept in SQLite. Every grant may expire.
 */
export class PermissionService {
  private readonly repo: PolicyRepository;
  private readonly clock: Clock;
  private readonly logger: ServiceContext['logger'];
  /** Every live grant, `always` ones loaded at start: the request path reads no table. */
  private readonly grants = new Map<string, LiveGrant>();
  /** The `always` grants read from the state store; the server serves once it has them. */
  readonly ready: Promise<void>;

  constructor(ctx: Pick<ServiceContext, 'clock' | 'logger'> & { repo: PolicyRepository }) {
    this.repo = ctx.repo;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.ready = this.repo.permissions().then((rows) => {
      for (const row of rows) this.grants.set(row.id, live(fromRow(row)));
    });
  }

  /** Grants a permission. Only admins grant (the route checks it too), so no caller grants itself anything it lacks. */
  async grant(granter: Principal, input: GrantInput): Promise<Grant> {
    if (!granter.admin) throw forbidden(`permissions.grant is admin-only: key '${granter.name}' is not an admin key`);
    const { action, when } = actionOf(input);
    if (isAdminOnly(action)) throw badRequest(`action: '${action}' is admin-only and cannot be granted`);
    const now = this.clock();
    const grant: Grant = {
      id: randomUUID(),
      principal: input.principal,
      action,
      resource: input.resource ?? '*',
      scope: input.scope ?? 'once',
      when,
      expires_at: input.expires_in ? new Date(now.getTime() + parseDuration(input.expires_in, 'expires_in')).toISOString() : null,
      uses: 0,
      granted_by: granter.name,
      granted_at: now.toISOString(),
    };
    if (grant.scope === 'always') await this.repo.insertPermission(toRow(grant));
    this.grants.set(grant.id, live(grant));
    return grant;
  }

  /** Live grants, oldest first: all of them for an admin, a caller's own otherwise. */
  list(caller: Principal): Grant[] {
    this.dropExpired();
    return [...this.grants.values()].filter((g) => caller.admin || g.principal === caller.name).map(view);
  }

  revoke(caller: Principal, id: string): string {
    if (!caller.admin) throw forbidden(`permissions.revoke is admin-only: key '${caller.name}' is not an admin key`);
    const grant = this.grants.get(id);
    if (!grant) throw notFound(`permission '${id}' not found`);
    this.grants.delete(id);
    if (grant.scope === 'always') this.write(this.repo.deletePermission(id), id);
    return `permission '${id}' revoked`;
  }

  /**
   * The live grant that covers a request, if any. With `consume`, its use is counted and a
   * `once` grant is gone; without, nothing changes (a dry run: POST /policy/check).
   */
  use(request: PolicyRequest, consume: boolean): Grant | undefined {
    const now = isoNow(this.clock);
    for (const grant of this.grants.values()) {
      if (grant.expires_at !== null && grant.expires_at <= now) continue;
      if (!covers(grant, request)) continue;
      if (!consume) return view(grant);
      grant.uses += 1;
      if (grant.scope === 'once') this.grants.delete(grant.id);
      else if (grant.scope === 'always') this.write(this.repo.countUse(grant.id), grant.id);
      return view(grant);
    }
    return undefined;
  }

  private dropExpired(): void {
    const now = isoNow(this.clock);
    for (const grant of this.grants.values()) {
      if (grant.expires_at === null || grant.expires_at > now) continue;
      this.grants.delete(grant.id);
      if (grant.scope === 'always') this.write(this.repo.deletePermission(grant.id), grant.id);
    }
  }

  /**
   * A change of a kept grant, in the background: the request path decides from memory, and the
   * table follows (a failed write is logged; the grant's memory is right until a restart).
   */
  private write(change: Promise<void>, id: string): void {
    change.catch((err: unknown) => this.logger.error({ err, permission: id }, 'a change of a kept permission grant was not stored'));
  }
}

function covers(grant: LiveGrant, request: PolicyRequest): boolean {
  return (
    grant.principal === request.principal &&
    grant.actionPattern.test(request.action) &&
    grant.resourcePattern.test(request.resource) &&
    Object.entries(grant.when).every(([key, value]) => (request.facts as Facts)[key] === value)
  );
}

const live = (grant: Grant): LiveGrant => ({ ...grant, actionPattern: compileGlobs([grant.action]), resourcePattern: compileGlobs([grant.resource]) });
const view = ({ actionPattern: _action, resourcePattern: _resource, ...grant }: LiveGrant): Grant => ({ ...grant, when: { ...grant.when } });

const toRow = (g: Grant): PermissionRow => ({
  id: g.id,
  principal: g.principal,
  action: g.action,
  resource: g.resource,
  conditions: JSON.stringify(g.when),
  expires_at: g.expires_at,
  uses: g.uses,
  granted_by: g.granted_by,
  granted_at: g.granted_at,
});

const fromRow = (row: PermissionRow): Grant => ({
  id: row.id,
  principal: row.principal,
  action: row.action,
  resource: row.resource,
  scope: 'always',
  when: JSON.parse(row.conditions) as Record<string, string | boolean>,
  expires_at: row.expires_at,
  uses: row.uses,
  granted_by: row.granted_by,
  granted_at: row.granted_at,
});
