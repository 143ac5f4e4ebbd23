import type { Backend } from '../backends/backend.js';
import { DEFAULT_IMAGE_DETECTION } from '../images/image-detection.js';
import { VERSION } from '../paths.js';
import { AuditRepository } from '../state/audit-repository.js';
import { BrowserEventRepository } from '../state/browser-event-repository.js';
import { DetachedRepository } from '../state/detached-repository.js';
import { SandboxRepository } from '../state/sandbox-repository.js';
import { SnapshotRepository } from '../state/snapshot-repository.js';
import type { Store } from '../state/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Tracing } from '../telemetry/tracing.js';
import { AuditService } from './audit-service.js';
import { BrowserService } from './browser-service.js';
import { systemClock, type Clock } from './clock.js';
import { DetachedService } from './detached-service.js';
import { ExecService } from './exec-service.js';
import { FileService } from './file-service.js';
import { HostStats } from './host-stats.js';
import { LifecycleService } from './lifecycle-service.js';
import { EVENTS_OFF, Observability, type EventSettings } from './observability.js';
import { RecoveryService } from './recovery-service.js';
import { RunService } from './run-service.js';
import { SandboxService } from './sandbox-service.js';
import { SnapshotService } from './snapshot-service.js';
import { WarmPool, type PoolSize } from './warm-pool.js';

export interface ServiceSettings {
  defaultImage: string;
  maxSandboxes: number;
  allowSudoExec: boolean;
  apiKeyConfigured: boolean;
  /** Repository part of snapshot image tags; default sandboxd-snapshot. */
  snapshotPrefix?: string;
  /** Most commands of one batch that run at once; default 4. */
  batchConcurrency?: number;
  /** program -> image for runs that name no image; laid over DEFAULT_IMAGE_DETECTION. */
  imageDetection?: Record<string, string>;
  /** Ready pool instances per (image, profile); default 0 (none made ahead of demand). */
  poolSize?: number;
  /** Sizes of particular keys, warmed at start. */
  poolSizes?: PoolSize[];
}

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
}

/** The service layer, wired once and shared by every face (HTTP, MCP). */
export class Services {
  readonly sandboxes: SandboxService;
  readonly exec: ExecService;
  readonly detached: DetachedService;
  readonly files: FileService;
  readonly runs: RunService;
  readonly audit: AuditService;
  readonly recovery: RecoveryService;
  readonly snapshots: SnapshotService;
  readonly lifecycle: LifecycleService;
  readonly browser: BrowserService;
  readonly pool: WarmPool;
  /** The backend as every service sees it: observed (timings, spans) by `observability`. */
  readonly backend: Backend;
  /** Event bus, metrics, webhooks and tracing. */
  readonly observability: Observability;
  private readonly sandboxRepo: SandboxRepository;
  private readonly hostStats: HostStats;
  private readonly startedAt = Date.now();
  private readonly settings: ServiceSettings;

  constructor({ settings, store, backend: engine, logger, clock = systemClock, events = EVENTS_OFF, tracing }: ServicesInput) {
    const sandboxRepo = new SandboxRepository(store.db, store.statements);
    this.sandboxRepo = sandboxRepo;
    this.settings = settings;
    this.observability = new Observability({
      backend: engine,
      events,
      ...(tracing ? { tracing } : {}),
      logger,
      activeSandboxes: async () => (await sandboxRepo.all()).filter((r) => r.status === 'running').length,
      warmPoolSize: () => this.pool.size,
    });
    const backend = this.observability.backend;
    this.backend = backend;
    this.pool = new WarmPool(
      backend,
      { size: settings.poolSize ?? 0, sizes: settings.poolSizes ?? [], defaultImage: settings.defaultImage },
      clock,
      logger.child({ part: 'pool' }),
    );
    this.audit = new AuditService(new AuditRepository(store.db, store.statements), clock, this.observability.bus);
    this.sandboxes = new SandboxService(sandboxRepo, backend, this.pool, this.audit, settings, clock, logger.child({ part: 'sandboxes' }));
    this.exec = new ExecService(this.sandboxes, backend, this.audit, settings);
    this.detached = new DetachedService(new DetachedRepository(store.db), this.sandboxes, this.exec, backend, this.audit);
    this.files = new FileService(this.sandboxes, backend, this.audit);
    this.runs = new RunService(this.sandboxes, this.exec, this.pool, logger.child({ part: 'runs' }), {
      batchConcurrency: settings.batchConcurrency ?? 4,
      imageDetection: { ...DEFAULT_IMAGE_DETECTION, ...settings.imageDetection },
      defaultImage: settings.defaultImage,
    });
    const snapshotRepo = new SnapshotRepository(store.db);
    this.snapshots = new SnapshotService(snapshotRepo, this.sandboxes, backend, this.audit, clock, logger.child({ part: 'snapshots' }), {
      snapshotPrefix: settings.snapshotPrefix ?? 'sandboxd-snapshot',
    });
    this.lifecycle = new LifecycleService(sandboxRepo, this.sandboxes, backend, this.audit, clock, logger.child({ part: 'lifecycle' }));
    this.recovery = new RecoveryService(sandboxRepo, snapshotRepo, backend, this.audit, clock, logger.child({ part: 'recovery' }));
    this.browser = new BrowserService(this.sandboxes, backend, new BrowserEventRepository(store.db), clock, this.observability.bus);
    this.hostStats = new HostStats(store.dataDir);
  }

  /** GET /status. */
  status() {
    return { version: VERSION, backend: this.backend.name, api_key_configured: this.settings.apiKeyConfigured };
  }

  /** GET /stats: counts and host-level resource figures. */
  async stats() {
    return {
      sandbox_count: await this.sandboxRepo.count(),
      sandbox_limit: this.settings.maxSandboxes,
      backend: this.backend.name,
      uptime_seconds: Math.floor((Date.now() - this.startedAt) / 1000),
      version: VERSION,
      resource_usage: this.hostStats.usage(),
    };
  }

  /**
   * Disconnects from browsers, empties the warm pool, stops webhook delivery and flushes
   * traces; the store and backend are closed by their owner.
   */
  async close(): Promise<void> {
    await this.browser.close();
    await this.pool.close();
    await this.observability.close();
  }

  /** Audit entries of one sandbox, oldest first. */
  async logs(name: string) {
    const sandbox = await this.sandboxes.require(name);
    return this.audit.entries(sandbox.uuid);
  }
}
