import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Live figures read at scrape time rather than tracked by hand. */
export interface MetricSources {
  /** Sandboxes whose stored status is running. */
  activeSandboxes: () => Promise<number>;
  /** Containers waiting in the warm pool. */
  warmPoolSize: () => number;
  /** Connected GET /events clients. */
  eventClients: () => number;
  /** Webhook deliveries waiting for a slot or a retry, and those in flight. */
  webhookQueue: () => { queued: number; inFlight: number };
  /** Durable objects that are active. */
  activeObjects: () => Promise<number>;
}

/** Seconds: an HTTP request or a fast exec is milliseconds; a cold create, seconds. */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Commands run from milliseconds to the 300 s default timeout and beyond. */
const COMMAND_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

/**
 * Every Prometheus series of one server, in a registry of its own (never prom-client's
 * global one, so that several servers in one process do not collide). Names follow the
 * Prometheus conventions: a `sandboxd_` prefix, base units, `_total` on counters.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = this.counter('sandboxd_http_requests_total', 'HTTP requests answered, by method, route template and status code', [
    'method',
    'route',
    'status',
  ]);

  readonly httpDuration = this.histogram(
    'sandboxd_http_request_duration_seconds',
    'HTTP request latency, from the request to the last byte of the response',
    LATENCY_BUCKETS,
    ['method', 'route', 'status'],
  );

  readonly sandboxEvents = this.counter(
    'sandboxd_sandbox_events_total',
    'Sandbox lifecycle events, by type (sandbox.created, sandbox.started, sandbox.stopped, sandbox.deleted, ...)',
    ['type'],
  );

  readonly sandboxCreateDuration = this.histogram(
    'sandboxd_sandbox_create_duration_seconds',
    'Time to create and start a sandbox, as its client waits for it',
    LATENCY_BUCKETS,
  );

  readonly backendDuration = this.histogram(
    'sandboxd_backend_operation_duration_seconds',
    'Time of backend operations (create, start, stop, remove, exec, ...), by operation and outcome',
    LATENCY_BUCKETS,
    ['operation', 'outcome'],
  );

  readonly commands = this.counter(
    'sandboxd_commands_total',
    'Commands run through exec, by outcome: success (exit 0), failure (non-zero exit) or timeout',
    ['outcome'],
  );

  readonly commandDuration = this.histogram('sandboxd_command_duration_seconds', 'Run time of commands run through exec', COMMAND_BUCKETS);

  readonly webhookDeliveries = this.counter(
    'sandboxd_webhook_deliveries_total',
    'Webhook deliveries finished, by outcome: delivered, or failed after every retry',
    ['outcome'],
  );

  readonly webhookAttempts = this.counter(
    'sandboxd_webhook_attempts_total',
    'Webhook POSTs sent, retries included, by result: ok, http_error or network_error',
    ['result'],
  );

  readonly webhookDropped = this.counter('sandboxd_webhook_dropped_total', 'Webhook deliveries dropped because the delivery queue was full');

  readonly timerFailures = this.counter(
    'sandboxd_timer_failures_total',
    'Failures of durable timer sources (reading their next due time or doing their due work), by source',
    ['source'],
  );

  readonly objectCalls = this.counter(
    'sandboxd_object_calls_total',
    'Durable-object method calls, by outcome: ok, threw (the method threw), timeout or error (the call could not run or its worker failed)',
    ['outcome'],
  );

  readonly objectCallDuration = this.histogram(
    'sandboxd_object_call_duration_seconds',
    'Time of durable-object calls, by cold: true when the call woke the object or started its worker',
    LATENCY_BUCKETS,
    ['cold'],
  );

  readonly scheduleRuns = this.counter(
    'sandboxd_schedule_runs_total',
    'Schedule runs recorded, by status: succeeded, failed, skipped (overlap), missed (misfire skip), interrupted (server stopped)',
    ['status'],
  );

  readonly scheduleLag = this.histogram(
    'sandboxd_schedule_lag_seconds',
    'Lag of schedule firings: when the run was claimed minus the occurrence it is for',
    LATENCY_BUCKETS,
  );

  readonly policyDecisions = this.counter(
    'sandboxd_policy_decisions_total',
    'Policy decisions on requests, by decision: allow, deny (answered 403) or audit_deny (a denial let through in audit mode)',
    ['decision'],
  );

  readonly storeOps = this.counter(
    'sandboxd_store_ops_total',
    'Durable-store operations (query, execute, command), by kind, op and outcome: ok, or the error code in lower case (sql_error, timeout, store_unavailable, ...)',
    ['kind', 'op', 'outcome'],
  );

  readonly storeOpDuration = this.histogram(
    'sandboxd_store_op_duration_seconds',
    'Time of durable-store operations, from the request to the engine\'s answer, by kind and op',
    LATENCY_BUCKETS,
    ['kind', 'op'],
  );

  readonly llmTokens = this.counter(
    'sandboxd_llm_tokens_total',
    'Tokens of LLM requests through the gateway, as the provider reported them, by provider and direction: input or output',
    ['provider', 'direction'],
  );

  readonly proxyRequests = this.counter(
    'sandboxd_proxy_requests_total',
    'Requests and CONNECT tunnels through the egress proxy, by decision: allow, deny (refused by the sandbox\'s rules or a hook) or error (allowed, but the upstream could not be reached or timed out)',
    ['decision'],
  );

  readonly orchestrations = this.counter(
    'sandboxd_orchestrations_total',
    'Orchestration instances, by status: started, then completed, failed or terminated',
    ['status'],
  );

  readonly activitiesInflight = new Gauge({
    name: 'sandboxd_activities_inflight',
    help: 'Orchestration activity attempts running now (at most [orchestrations].concurrency)',
    registers: [this.registry],
  });

  readonly activityDuration = this.histogram(
    'sandboxd_activity_duration_seconds',
    'Run time of orchestration activity attempts, by type (run, exec, call) and outcome (completed, failed, cancelled)',
    COMMAND_BUCKETS,
    ['type', 'outcome'],
  );

  readonly uncaughtErrors = this.counter(
    'sandboxd_uncaught_errors_total',
    'Errors that escaped every handler (each one a bug), by kind: exception or rejection; the server logged them and kept serving',
    ['kind'],
  );

  readonly eventClientsDropped = this.counter(
    'sandboxd_event_stream_clients_dropped_total',
    'GET /events clients disconnected because they read too slowly',
  );

  constructor(sources: MetricSources, build: { version: string; backend: string }) {
    const registers = [this.registry];
    new Gauge({
      name: 'sandboxd_sandboxes_active',
      help: 'Sandboxes that are running',
      registers,
      async collect() {
        this.set(await sources.activeSandboxes());
      },
    });
    new Gauge({
      name: 'sandboxd_objects_active',
      help: 'Durable objects that are active (not hibernating)',
      registers,
      async collect() {
        this.set(await sources.activeObjects());
      },
    });
    new Gauge({
      name: 'sandboxd_warm_pool_size',
      help: 'Started containers waiting in the warm pool',
      registers,
      collect() {
        this.set(sources.warmPoolSize());
      },
    });
    new Gauge({
      name: 'sandboxd_event_stream_clients',
      help: 'Connected GET /events clients',
      registers,
      collect() {
        this.set(sources.eventClients());
      },
    });
    new Gauge({
      name: 'sandboxd_webhook_queue',
      help: 'Webhook deliveries queued (waiting for a slot or a retry) and in flight',
      labelNames: ['state'] as const,
      registers,
      collect() {
        const { queued, inFlight } = sources.webhookQueue();
        this.set({ state: 'queued' }, queued);
        this.set({ state: 'in_flight' }, inFlight);
      },
    });
    new Gauge({
      name: 'sandboxd_build_info',
      help: 'Always 1; the labels say which build runs',
      labelNames: ['version', 'node_version', 'backend'] as const,
      registers,
    }).set({ version: build.version, node_version: process.version, backend: build.backend }, 1);
  }

  private counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string = never>(name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  /** The exposition in Prometheus text format, and its content type. */
  async scrape(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}
