import { policyRouteActions, policyRoutes } from '../../http/routes/policy-routes.js';
import { permissionTools } from '../../mcp/tools/permission-tools.js';
import type { DomainModule } from '../domain-module.js';
import { PermissionService } from './permission-service.js';
import { PolicyService } from './policy-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Permission grants an admin gives. */
    permissions: PermissionService;
    /** The policy every request is decided by. */
    policy: PolicyService;
  }
}

/** Governance: policy rules, grants and the decision of every request. */
export const governanceModule = {
  name: 'governance',
  wire(ctx) {
    const permissions = new PermissionService({ clock: ctx.clock, logger: ctx.logger.child({ part: 'permissions' }), repo: ctx.repos.policy });
    const policy = new PolicyService({
      ...ctx,
      logger: ctx.logger.child({ part: 'policy' }),
      repo: ctx.repos.policy,
      permissions,
      decisions: ctx.metrics.policyDecisions,
    });
    return { permissions, policy };
  },
  routes: [policyRoutes],
  routeActions: policyRouteActions,
  tools: permissionTools,
  eventKinds: ['policy.denied'],
  metrics: ['sandboxd_policy_decisions_total'],
} satisfies DomainModule;
