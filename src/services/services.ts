import type { Backend } from '../backends/backend.js';
import { join } from 'node:path';
import { VERSION } from '../paths.js';
import { AuditRepository } from '../state/audit-repository.js';
import { BrowserEventRepository } from '../state/browser-event-repository.js';
import { DetachedRepository } from '../state/detached-repository.js';
import { ObjectRepository } from '../state/object-repository.js';
import { OrchestrationRepository } from '../state/orchestration-repository.js';
import { SandboxRepository } from '../state/sandbox-repository.js';
import { ScheduleRepository } from '../state/schedule-repository.js';
import { SnapshotRepository } from '../state/snapshot-repository.js';
import { PolicyRepository } from '../state/policy-repository.js';
import { StoreRepository } from '../state/store-repository.js';
import { LlmRepository } from '../state/llm-repository.js';
import { ProxyRepository } from '../state/proxy-repository.js';
import type { Store } from '../state/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Tracing } from '../telemetry/tracing.js';
import { BrowserService } from './browser/index.js';
import { PreviewService } from './preview/index.js';
import { DetachedService, ExecService, RunService, TerminalService } from './commands/index.js';
import { PoolBudget, RunPool, WarmPool } from './pools/index.js';
import type { Repositories, ServiceContext, ServiceSettings } from './context.js';
import { DurableTimers, ScheduleService } from './durable/index.js';
import { OrchestrationService, OrchestrationTimers } from './durable/orchestrations/service-index.js';
import { ObjectAlarms, ObjectClasses, ObjectHibernation, ObjectService } from './durable/objects/index.js';
import { StoreService, storeEngines, type StoreEngine } from './durable/stores/index.js';
import { EgressService } from './egress/index.js';
import { AuditService, EVENTS_OFF, Observability, type EventSettings } from './events/index.js';
import { PermissionService, PolicyService } from './governance/index.js';
import { FileService, FsViewService, ImageService, LifecycleService, RecoveryService, SandboxService, SnapshotService, VolumeService } from './sandboxes/index.js';
import { declaredCapabilities, HostStats, secretBoxFor, systemClock, type Clock, type SecretBox } from './support/index.js';

export type { ServiceSettings };

export interface ServicesInput {
  settings: ServiceSettings;
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
  /** One engine per store kind offered; default every kind's real engine (`storeEngines`). */
  engines?: StoreEngine[];
  /** The server's environment (LLM keys given as `env`); default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** The service layer, wired once and shared by every face (HTTP, MCP). */
export class Services {
  readonly sandboxes: SandboxService;
  readonly exec: ExecService;
  readonly detached: DetachedService;
  readonly terminals: TerminalService;
  readonly files: FileService;
  /** Listings, stat and watches of a sandbox's files. */
  readonly fsViews: FsViewService;
  /** Named volumes. */
  readonly volumes: VolumeService;
  readonly runs: RunService;
  readonly audit: AuditService;
  readonly recovery: RecoveryService;
  readonly snapshots: SnapshotService;
  readonly images: ImageService;
  readonly lifecycle: LifecycleService;
  readonly browser: BrowserService;
  /** Preview URLs: HTTP and WebSocket traffic to ports inside sandboxes. */
  readonly preview: PreviewService;
  readonly pool: WarmPool;
  /** Reusable instances behind fast runs (where the backend declares `reuse`). */
  readonly runPool: RunPool;
  /** The driver of work due at a time; the runtime starts it after recovery. */
  readonly timers: DurableTimers;
  /** Durable-object classes. */
  readonly objectClasses: ObjectClasses;
  /** Durable objects and their calls. */
  readonly objects: ObjectService;
  /** Cron and one-shot firings; its `firing` is a source of `timers`. */
  readonly schedules: ScheduleService;
  /** Orchestration definitions and instances; its timers are a source of `timers`. */
  readonly orchestrations: OrchestrationService;
  /** Durable stores; its `handles` is a source of `timers` (idle connections closed). */
  readonly stores: StoreService;
  readonly secrets: SecretBox;
  /** The proxy port and what it serves sandboxes: the LLM gateway, its keys and usage. */
  readonly egress: EgressService;
  /** Permission grants an admin gives. */
  readonly permissions: PermissionService;
  /** The policy every request is decided by. */
  readonly policy: PolicyService;
  /** The backend as every service sees it: observed (timings, spans) by `observability`. */
  readonly backend: Backend;
  /** Event bus, metrics, webhooks and tracing. */
  readonly observability: Observability;
  private readonly repos: Repositories;
  private readonly hostStats: HostStats;
  private readonly startedAt = Date.now();
  private readonly settings: ServiceSettings;

  constructor({ settings, store, backend: engine, logger, clock = systemClock, events = EVENTS_OFF, tracing, secrets, engines, env }: ServicesInput) {
    const repos: Repositories = {
      sandboxes: new SandboxRepository(store.db, store.statements),
      snapshots: new SnapshotRepository(store.db),
      audit: new AuditRepository(store.db, store.statements),
      detached: new DetachedRepository(store.db),
      browserEvents: new BrowserEventRepository(store.db),
      objects: new ObjectRepository(store.db),
      schedules: new ScheduleRepository(store.db, store.statements),
      stores: new StoreRepository(store.db),
      llm: new LlmRepository(store.db),
      proxy: new ProxyRepository(store.statements),
      policy: new PolicyRepository(store.db, store.statements),
      orchestrations: new OrchestrationRepository(store.statements),
    };
    this.repos = repos;
    this.settings = settings;
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
    // Parts are built in dependency order; each takes the part of the context it names.
    const base = { settings, repos, backend: this.backend, clock, bus: this.observability.bus };
    const part = (name: string) => ({ ...base, logger: logger.child({ part: name }) });
    const metrics = this.observability.metrics;
    this.timers = new DurableTimers({ ...part('timers'), onFailure: (source) => metrics.timerFailures.inc({ source }) });
    this.secrets = secrets ?? secretBoxFor(store.dataDir, undefined, logger.child({ part: 'secrets' }));
    const poolBudget = new PoolBudget(settings.poolMemoryMb ?? 8192);
    this.pool = new WarmPool({ ...part('pool'), poolBudget });
    this.runPool = new RunPool({ ...part('run-pool'), poolBudget });
    this.audit = new AuditService(base);
    this.sandboxes = new SandboxService({ ...part('sandboxes'), pool: this.pool, audit: this.audit });
    this.egress = new EgressService({
      ...part('egress'),
      settings: settings.egress ?? { enabled: false, port: 0 },
      sandboxes: repos.sandboxes,
      llm: repos.llm,
      proxy: repos.proxy,
      audit: this.audit,
      secrets: this.secrets,
      metrics,
      ...(env ? { env } : {}),
    });
    this.sandboxes.onCreated(async (sandbox, input) => {
      if (input.llm_budget_tokens !== undefined) await this.egress.setBudget(sandbox.uuid, input.llm_budget_tokens);
      if (input.secrets) this.egress.secrets.save(sandbox.uuid, input.secrets, sandbox.env);
    });
    this.sandboxes.onRemoved(async (sandbox) => {
      await this.egress.setBudget(sandbox.uuid, undefined);
      this.egress.secrets.remove(sandbox.uuid);
    });
    this.sandboxes.proxyListening = () => this.egress.url !== undefined;
    const exec = new ExecService({ ...base, sandboxes: this.sandboxes, audit: this.audit, serverEnv: (sandbox) => this.egress.sandboxEnv(sandbox) });
    const ctx: ServiceContext = { ...part('services'), audit: this.audit, pool: this.pool, poolBudget, runPool: this.runPool, sandboxes: this.sandboxes, exec, timers: this.timers, secrets: this.secrets };
    this.exec = ctx.exec;
    this.detached = new DetachedService(ctx);
    this.terminals = new TerminalService(ctx);
    this.files = new FileService(ctx);
    this.fsViews = new FsViewService(ctx);
    this.volumes = new VolumeService(ctx);
    this.runs = new RunService({ ...ctx, ...part('runs') });
    this.snapshots = new SnapshotService({ ...ctx, ...part('snapshots') });
    this.images = new ImageService(ctx);
    this.lifecycle = new LifecycleService({ ...ctx, ...part('lifecycle') });
    this.recovery = new RecoveryService({ ...ctx, ...part('recovery') });
    this.browser = new BrowserService(ctx);
    this.preview = new PreviewService({ ...ctx, ...(settings.previewDomain ? { domain: settings.previewDomain } : {}) });
    this.objectClasses = new ObjectClasses({ ...ctx, repo: repos.objects, runs: this.runs, maxStorageBytes: settings.objectMaxStorage ?? 4 * 1024 * 1024 });
    this.objects = new ObjectService({
      ...ctx,
      ...part('objects'),
      repo: repos.objects,
      classes: this.objectClasses,
      metrics,
      concurrency: settings.objectConcurrency ?? 16,
    });
    this.timers.register(new ObjectAlarms(repos.objects, this.objects, () => void this.timers.poke(), logger.child({ part: 'object-alarms' }), clock));
    this.timers.register(new ObjectHibernation(repos.objects, this.objects));
    this.orchestrations = new OrchestrationService({
      ...ctx,
      ...part('orchestrations'),
      repo: repos.orchestrations,
      runs: this.runs,
      exec: this.exec,
      objects: this.objects,
      metrics,
      concurrency: settings.orchestrationConcurrency ?? 16,
      retentionMs: settings.orchestrationRetentionMs ?? 30 * 86_400_000,
    });
    this.timers.register(new OrchestrationTimers(repos.orchestrations, this.orchestrations));
    this.schedules = new ScheduleService({
      ...ctx,
      ...part('schedules'),
      runs: this.runs,
      objects: this.objects,
      orchestrations: this.orchestrations,
      metrics,
    });
    this.timers.register(this.schedules.firing);
    this.stores = new StoreService({
      ...ctx,
      ...part('stores'),
      engines: engines ?? storeEngines({ workers: settings.storeWorkers ?? 2, exec: ctx.exec, clock, logger: logger.child({ part: 'stores' }) }),
      metrics,
      storesDir: join(store.dataDir, 'stores'),
      poke: () => void this.timers.poke(),
    });
    this.timers.register(this.stores.handles);
    this.permissions = new PermissionService({ clock, repo: repos.policy });
    this.policy = new PolicyService({
      ...part('policy'),
      audit: this.audit,
      repo: repos.policy,
      permissions: this.permissions,
      decisions: metrics.policyDecisions,
      settings: settings.policy ?? {},
    });
    this.hostStats = new HostStats(store.dataDir);
  }

  /** GET /status. */
  status() {
    return {
      version: VERSION,
      backend: this.backend.name,
      api_key_configured: this.settings.apiKeyConfigured,
      capabilities: declaredCapabilities(this.backend),
    };
  }

  /** GET /stats: counts and host-level resource figures. */
  async stats() {
    return {
      sandbox_count: await this.repos.sandboxes.count(),
      sandbox_limit: this.settings.maxSandboxes,
      backend: this.backend.name,
      uptime_seconds: Math.floor((Date.now() - this.startedAt) / 1000),
      version: VERSION,
      resource_usage: this.hostStats.usage(),
    };
  }

  /**
   * Stops the timers driver, disconnects from browsers, empties the warm pool, stops webhook
   * delivery and flushes traces; the store and backend are closed by their owner.
   */
  async close(): Promise<void> {
    this.terminals.close();
    await this.timers.close();
    await this.egress.close();
    await this.orchestrations.close();
    this.objects.close();
    await this.schedules.close();
    await this.stores.close();
    await this.browser.close();
    this.preview.close();
    await this.pool.close();
    await this.runPool.close();
    await this.observability.close();
  }

  /** Audit entries of one sandbox, oldest first. */
  async logs(name: string) {
    const sandbox = await this.sandboxes.require(name);
    return this.audit.entries(sandbox.uuid);
  }
}
