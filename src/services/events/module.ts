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
  metrics: ['sandboxd_sandbox_events_total', 'sandboxd_webhook_deliveries_total', 'sandboxd_webhook_attempts_total', 'sandboxd_webhook_dropped_total', 'sandboxd_event_stream_clients_dropped_total', 'sandboxd_event_stream_clients', 'sandboxd_webhook_queue'],
} satisfies DomainModule;
