import { v7 as uuidv7 } from 'uuid';
import type { Backend } from '../backends/backend.js';
import type { Config } from '../config/config-schema.js';
import { VERSION } from '../paths.js';
import { AuditRepository } from '../state/audit-repository.js';
import { BrowserEventRepository } from '../state/browser-event-repository.js';
import { DetachedRepository } from '../state/detached-repository.js';
import { LlmRepository } from '../state/llm-repository.js';
import { ObjectRepository } from '../state/object-repository.js';
import { OrchestrationRepository } from '../state/orchestration-repository.js';
import { PolicyRepository } from '../state/policy-repository.js';
import { ProxyRepository } from '../state/proxy-repository.js';
import { SandboxRepository } from '../state/sandbox-repository.js';
import { ScheduleRepository } from '../state/schedule-repository.js';
import { SnapshotRepository } from '../state/snapshot-repository.js';
import { StoreRepository } from '../state/store-repository.js';
import type { Store } from '../state/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Repositories, ServiceBase, ServiceContext, ServiceCore, ServiceInputs, ServiceParts, WiringContext } from './context.js';
import { DOMAINS } from './domains.js';
import { DurableTimers } from './durable/durable-timers.js';
import { EVENTS_OFF, Observability, type EventSettings } from './events/observability.js';
import { declaredCapabilities, Departures, HostStats, secretBoxFor, systemClock, type Clock, type SecretBox } from './support/index.js';
import { liveReplicaIds } from './support/replica.js';

export interface ServicesInput extends ServiceInputs {
  /** The parsed config, whole: every default is the schema's. */
  config: Config;
  store: Store;
  backend: Backend;
  logger: Logger;
  clock?: Clock;
  /** Off unless given: GET /events answers 503 and no webhook is called. */
  events?: EventSettings;
  /** Trace export; spans of requests and backend work. */
  tracing?: Tracing;
  /** The box for secrets at rest; default `<data-dir>/secret.key`, made on first use. */
  secrets?: SecretBox;
  /** The server's environment (LLM keys given as `env`); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** This server's id among the replicas of its database (Replica); default a new one. */
  replicaId?: string;
}

/** Reads of a part that no domain before the reader built fail at once, naming the part. */
function wiringContext(built: ServiceBase & Partial<ServiceParts>, reader: string): WiringContext {
  return new Proxy(built, {
    get(target, key, receiver) {
      if (typeof key === 'string' && !(key in target)) {
        throw new Error(`domain ${reader} reads the part '${key}', which no domain before it in DOMAINS builds`);
      }
      return Reflect.get(target, key, receiver) as unknown;
    },
  }) as WiringContext;
}

// Every domain's part, assigned by the wiring loop (see DOMAINS).
export interface Services extends ServiceParts {}

/**
 * The service layer, wired once and shared by every face (HTTP, MCP): the base (repositories,
 * the observed backend, the bus and metrics, the timers driver), then each domain of `DOMAINS`
 * in order, each reading the parts of the domains before it.
 */
export class Services implements ServiceCore {
  /** The backend as every service sees it: observed (timings, spans) by `observability`. */
  readonly backend: Backend;
  /** Event bus, metrics, webhooks and tracing. */
  readonly observability: Observability;
  /** The driver of work due at a time; the runtime starts it after recovery. */
  readonly timers: DurableTimers;
  readonly secrets: SecretBox;
  /** Removed sandboxes whose container the engine still removes; close waits for them. */
  readonly departures: Departures;
  private readonly repos: Repositories;
  private readonly hostStats: HostStats;
  private readonly startedAt = Date.now();
  private readonly config: Config;

  constructor({ config, store, backend: engine, logger, clock = systemClock, events = EVENTS_OFF, tracing, secrets, env = process.env, replicaId = uuidv7(), ...inputs }: ServicesInput) {
    const repos: Repositories = {
      sandboxes: new SandboxRepository(store.db, store.sql),
      snapshots: new SnapshotRepository(store.db),
      audit: new AuditRepository(store.db, store.sql),
      detached: new DetachedRepository(store.db),
      browserEvents: new BrowserEventRepository(store.db),
      objects: new ObjectRepository(store.db, store.sql),
      schedules: new ScheduleRepository(store.db, store.sql),
      stores: new StoreRepository(store.db),
      llm: new LlmRepository(store.db),
      proxy: new ProxyRepository(store.sql),
      policy: new PolicyRepository(store.db, store.sql),
      orchestrations: new OrchestrationRepository(store.sql),
    };
    this.repos = repos;
    this.config = config;
    this.observability = new Observability({
      backend: engine,
      events,
      ...(tracing ? { tracing } : {}),
      logger,
      activeSandboxes: async () => (await repos.sandboxes.all()).filter((r) => r.status === 'running').length,
      warmPoolSize: () => this.pool.size,
      activeObjects: () => repos.objects.countActive(),
    });
    this.backend = this.observability.backend;
    const metrics = this.observability.metrics;
    this.timers = new DurableTimers({ clock, logger: logger.child({ part: 'timers' }), onFailure: (source) => metrics.timerFailures.inc({ source }) });
    this.secrets = secrets ?? secretBoxFor(store.dataDir, undefined, logger.child({ part: 'secrets' }));
    this.departures = new Departures(logger.child({ part: 'departures' }));
    const built: ServiceBase & Partial<ServiceParts> = {
      config,
      repos,
      backend: this.backend,
      clock,
      logger: logger.child({ part: 'services' }),
      bus: this.observability.bus,
      metrics,
      secrets: this.secrets,
      timers: this.timers,
      departures: this.departures,
      replica: {
        id: replicaId,
        othersAlive: async () => {
          const alive = await liveReplicaIds(store.db, clock().getTime());
          alive.delete(replicaId);
          return alive;
        },
      },
      store,
      env,
      inputs,
    };
    for (const domain of DOMAINS) Object.assign(built, domain.wire?.(wiringContext(built, domain.name)));
    // Every domain has just added its parts: the context is whole.
    const whole = built as ServiceContext;
    for (const domain of DOMAINS) for (const source of domain.timers?.(whole) ?? []) this.timers.register(source);
    Object.assign(this, whole);
    this.hostStats = new HostStats(store.dataDir);
  }

  /** GET /status. */
  status() {
    return {
      version: VERSION,
      backend: this.backend.name,
      api_key_configured: this.config.apiKeys.length + this.config.namedKeys.length > 0,
      events_enabled: this.observability.bus.enabled,
      capabilities: declaredCapabilities(this.backend),
    };
  }

  /** GET /stats: counts and host-level resource figures. */
  async stats() {
    return {
      sandbox_count: await this.repos.sandboxes.count(),
      sandbox_limit: this.config.maxSandboxes,
      backend: this.backend.name,
      uptime_seconds: Math.floor((Date.now() - this.startedAt) / 1000),
      version: VERSION,
      resource_usage: this.hostStats.usage(),
    };
  }

  /**
   * Stops the timers driver, then every domain's background work in reverse wiring order
   * (browsers, the pools, webhook delivery...), then waits for the containers still being
   * removed, then flushes traces; the store and backend are closed by their owner.
   */
  async close(): Promise<void> {
    await this.timers.close();
    for (const domain of [...DOMAINS].reverse()) await domain.close?.(this);
    await this.departures.settled();
    await this.observability.close();
  }

  /** Audit entries of one sandbox, oldest first. */
  async logs(name: string) {
    const sandbox = await this.sandboxes.require(name);
    return this.audit.entries(sandbox.uuid);
  }
}
