import type { Backend } from '../../backends/backend.js';
import { instrumentBackend } from '../../backends/instrumented-backend.js';
import { VERSION } from '../../paths.js';
import type { Logger } from '../../telemetry/logger.js';
import { Metrics } from '../../telemetry/metrics.js';
import type { Tracing } from '../../telemetry/tracing.js';
import { EventBus, type PublishedEvent } from './event-bus.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';

/** How events leave the server. */
export interface EventSettings {
  /** GET /events and webhooks; on when --events, --webhook-url or --otel-endpoint is given. */
  enabled: boolean;
  /** Events kept for Last-Event-ID resume. */
  backlog: number;
  webhookUrls: string[];
  webhookSecret?: string;
}

export const EVENTS_OFF: EventSettings = { enabled: false, backlog: 1000, webhookUrls: [] };

export interface ObservabilityInput {
  backend: Backend;
  events: EventSettings;
  tracing?: Tracing;
  logger: Logger;
  /** Running sandboxes, read at scrape time. */
  activeSandboxes: () => Promise<number>;
  /** Ready warm-pool instances, read at scrape time. */
  warmPoolSize: () => number;
  /** Active durable objects, read at scrape time. */
  activeObjects: () => Promise<number>;
}

/**
 * Metrics, events, webhooks and tracing of one server, wired in one place: the backend is
 * wrapped once (timings, spans), lifecycle events feed the metrics and the webhooks.
 */
export class Observability {
  readonly bus: EventBus;
  readonly metrics: Metrics;
  readonly backend: Backend;
  readonly tracing: Tracing | undefined;
  private readonly webhooks: WebhookDispatcher | undefined;

  constructor({ backend, events, tracing, logger, activeSandboxes, warmPoolSize, activeObjects }: ObservabilityInput) {
    this.tracing = tracing;
    this.bus = new EventBus({ enabled: events.enabled, backlog: events.backlog, logger: logger.child({ part: 'events' }) });
    this.metrics = new Metrics(
      {
        activeSandboxes,
        warmPoolSize,
        activeObjects,
        eventClients: () => this.bus.clients,
        webhookQueue: () => this.webhooks?.stats() ?? { queued: 0, inFlight: 0 },
      },
      { version: VERSION, backend: backend.name },
    );
    this.backend = instrumentBackend(backend, this.metrics, tracing);
    this.bus.subscribe((published) => this.count(published));
    if (events.enabled && events.webhookUrls.length > 0) {
      const webhooks = new WebhookDispatcher({
        urls: events.webhookUrls,
        ...(events.webhookSecret ? { secret: events.webhookSecret } : {}),
        metrics: this.metrics,
        logger: logger.child({ part: 'webhooks' }),
      });
      this.bus.subscribe((published) => webhooks.enqueue(published));
      this.webhooks = webhooks;
    }
  }

  /** Lets pending webhook deliveries finish (2 s at most) and flushes buffered spans. */
  async close(): Promise<void> {
    await this.webhooks?.close();
    await this.tracing?.shutdown();
  }

  /** Lifecycle counters and command figures, from the events every path publishes. */
  private count({ event }: PublishedEvent): void {
    const { metrics } = this;
    if (!event.resource) metrics.sandboxEvents.inc({ type: event.type });
    const seconds = Number(event.metadata.duration_ms) / 1000;
    if (event.type === 'sandbox.created') metrics.sandboxCreateDuration.observe(seconds);
    if (event.type === 'sandbox.exec.completed') {
      const { success, timed_out: timedOut } = event.metadata;
      metrics.commands.inc({ outcome: success ? 'success' : timedOut ? 'timeout' : 'failure' });
      metrics.commandDuration.observe(seconds);
    }
  }
}
