import { orchestrationRouteActions, orchestrationRoutes } from '../../../http/routes/orchestration-routes.js';
import { orchestrationTools } from '../../../mcp/tools/orchestration-tools.js';
import type { DomainModule } from '../../domain-module.js';
import { OrchestrationService } from './orchestration-service.js';
import { OrchestrationTimers } from './orchestration-timers.js';

declare module '../../context.js' {
  interface ServiceParts {
    /** Orchestration definitions and instances. */
    orchestrations: OrchestrationService;
  }
}

/** Orchestrations: definitions, instances, their history, activities and timers. */
export const orchestrationsModule = {
  name: 'orchestrations',
  wire: (ctx) => ({
    orchestrations: new OrchestrationService({
      ...ctx,
      logger: ctx.logger.child({ part: 'orchestrations' }),
      repo: ctx.repos.orchestrations,
    }),
  }),
  routes: [orchestrationRoutes],
  routeActions: orchestrationRouteActions,
  tools: orchestrationTools,
  timers: ({ repos, orchestrations }) => [new OrchestrationTimers(repos.orchestrations, orchestrations)],
  close: ({ orchestrations }) => orchestrations.close(),
  eventKinds: ['orchestration.started', 'orchestration.completed', 'orchestration.failed', 'orchestration.terminated'],
  metrics: ['sandboxd_orchestrations_total', 'sandboxd_activities_inflight', 'sandboxd_activity_duration_seconds'],
} satisfies DomainModule;
