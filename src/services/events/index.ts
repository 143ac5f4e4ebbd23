/**
 * Events: the audit log and the one place events are published (`AuditService`), the event
 * bus with its resumable backlog (`EventBus`), webhook delivery, and `Observability`, which
 * wires the bus, metrics, webhooks and tracing and wraps the backend once.
 */
export { AuditService } from './audit-service.js';
export { EventBus, type EventResource, type NewEvent, type PublishedEvent, type SandboxEvent } from './event-bus.js';
export { EVENTS_OFF, Observability, type EventSettings } from './observability.js';
