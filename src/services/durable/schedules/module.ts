import { scheduleRouteActions, scheduleRoutes } from '../../../http/routes/schedule-routes.js';
import { scheduleTools } from '../../../mcp/tools/schedule-tools.js';
import type { DomainModule } from '../../domain-module.js';
import { ScheduleService } from './schedule-service.js';

declare module '../../context.js' {
  interface ServiceParts {
    /** Cron and one-shot firings. */
    schedules: ScheduleService;
  }
}

/** Schedules: cron and one-shot firings of runs, object calls and orchestrations. */
export const schedulesModule = {
  name: 'schedules',
  wire: (ctx) => ({ schedules: new ScheduleService({ ...ctx, logger: ctx.logger.child({ part: 'schedules' }) }) }),
  routes: [scheduleRoutes],
  routeActions: scheduleRouteActions,
  tools: scheduleTools,
  timers: ({ schedules }) => [schedules.firing],
  close: ({ schedules }) => schedules.close(),
  eventKinds: ['schedule.run.failed'],
  metrics: ['sandboxd_schedule_runs_total', 'sandboxd_schedule_lag_seconds'],
} satisfies DomainModule;
