import { eventRouteActions, eventRoutes } from '../../http/routes/event-routes.js';
import type { DomainModule } from '../domain-module.js';
import { AuditService } from './audit-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** The audit log of sandboxes and the events it publishes. */
    audit: AuditService;
  }
}

/** Events: the audit log, GET /events (SSE) and webhooks (the bus itself is part of the base). */
export const eventsModule = {
  name: 'events',
  wire: (ctx) => ({ audit: new AuditService(ctx) }),
  routes: [eventRoutes],
  routeActions: eventRouteActions,
} satisfies DomainModule;
