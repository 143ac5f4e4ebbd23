import { detachedRouteActions, detachedRoutes } from '../../http/routes/detached-routes.js';
import { execRouteActions, execRoutes } from '../../http/routes/exec-routes.js';
import { runRouteActions, runRoutes } from '../../http/routes/run-routes.js';
import { detachedTools } from '../../mcp/tools/detached-tools.js';
import { execTools } from '../../mcp/tools/exec-tools.js';
import type { DomainModule } from '../domain-module.js';
import { DetachedService } from './detached-service.js';
import { ExecService } from './exec-service.js';
import { RunService } from './run-service.js';

declare module '../context.js' {
  interface ServiceParts {
    exec: ExecService;
    detached: DetachedService;
    runs: RunService;
  }
}

/** Commands: exec, detached commands, one-shot runs and batches. */
export const commandsModule = {
  name: 'commands',
  wire(ctx) {
    const exec = new ExecService({ ...ctx, serverEnv: (sandbox) => ctx.egress.sandboxEnv(sandbox) });
    const withExec = { ...ctx, exec };
    return {
      exec,
      detached: new DetachedService(withExec),
      runs: new RunService({ ...withExec, logger: ctx.logger.child({ part: 'runs' }) }),
    };
  },
  routes: [execRoutes, detachedRoutes, runRoutes],
  routeActions: { ...execRouteActions, ...detachedRouteActions, ...runRouteActions },
  tools: [...execTools, ...detachedTools],
  eventKinds: ['sandbox.exec.completed'],
  metrics: ['sandboxd_commands_total', 'sandboxd_command_duration_seconds'],
} satisfies DomainModule;
