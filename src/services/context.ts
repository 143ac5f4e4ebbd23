import type { Backend } from '../backends/backend.js';
import type { AuditRepository } from '../state/audit-repository.js';
import type { BrowserEventRepository } from '../state/browser-event-repository.js';
import type { DetachedRepository } from '../state/detached-repository.js';
import type { ObjectRepository } from '../state/object-repository.js';
import type { PolicyRepository } from '../state/policy-repository.js';
import type { OrchestrationRepository } from '../state/orchestration-repository.js';
import type { SandboxRepository } from '../state/sandbox-repository.js';
import type { ScheduleRepository } from '../state/schedule-repository.js';
import type { SnapshotRepository } from '../state/snapshot-repository.js';
import type { StoreRepository } from '../state/store-repository.js';
import type { Logger } from '../telemetry/logger.js';
import type { ExecService } from './commands/exec-service.js';
import type { PoolSize } from './pools/pool-types.js';
import type { WarmPool } from './pools/warm-pool.js';
import type { PoolBudget } from './pools/pool-budget.js';
import type { RunPool } from './pools/run-pool.js';
import type { AuditService } from './events/audit-service.js';
import type { DurableTimers } from './durable/durable-timers.js';
import type { EventBus } from './events/event-bus.js';
import type { SandboxService } from './sandboxes/sandbox-service.js';
import type { Clock } from './support/clock.js';
import type { SecretBox } from './support/secret-box.js';
import type { EgressSettings } from './egress/egress-service.js';
import type { LlmRepository } from '../state/llm-repository.js';
import type { ProxyRepository } from '../state/proxy-repository.js';
import type { PolicySettings } from './governance/policy-service.js';

/** The server's settings that the service layer reads. */
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
  /** MiB of memory limits that warm instances may hold in all (pools grow into it); default 8192. */
  poolMemoryMb?: number;
  /** Durable-object calls running at once, over all objects; default 16. */
  objectConcurrency?: number;
  /** Storage limit of an object whose class sets none; default 4 MiB. */
  objectMaxStorage?: number;
  /** Child processes that run host SQLite store SQL (read where the sqlite engine is built); default 2. */
  storeWorkers?: number;
  /** Default timeout_ms of store query, execute and command; default 10000. */
  storeTimeoutMs?: number;
  /** Globs of the hosts external stores may connect to; default ['*']. */
  storeAllowedHosts?: string[];
  /** The policy rule file, its mode and whether allowed requests are audited too; default none (everything allowed). */
  policy?: PolicySettings;
  /** Orchestration activities running at once, over all instances; default 8. */
  orchestrationConcurrency?: number;
  /** Milliseconds finished orchestration instances are kept; default 30 days. */
  orchestrationRetentionMs?: number;
  /** Host limits that vcpus and memory_mb are checked against; default this host's. */
  hostCpus?: number;
  hostMemoryMb?: number;
  /** The proxy port and the LLM gateway ([proxy], [llm]); off when absent. */
  egress?: EgressSettings;
  /** The domain of preview URLs' host form `<port>-<name>.<domain>`; default sandbox.localhost. */
  previewDomain?: string;
}

/** The state store's repositories, one per table family. */
export interface Repositories {
  sandboxes: SandboxRepository;
  snapshots: SnapshotRepository;
  audit: AuditRepository;
  detached: DetachedRepository;
  browserEvents: BrowserEventRepository;
  objects: ObjectRepository;
  schedules: ScheduleRepository;
  stores: StoreRepository;
  llm: LlmRepository;
  proxy: ProxyRepository;
  policy: PolicyRepository;
  orchestrations: OrchestrationRepository;
}

/**
 * Everything a part of the service layer may be built from. `services.ts` fills it once, part
 * by part; each part's constructor takes the `Pick` of it that it uses, by name, so that the
 * compiler checks the wiring and no constructor has positional arguments.
 */
export interface ServiceContext {
  settings: ServiceSettings;
  repos: Repositories;
  /** The backend as every service sees it: observed (timings, spans). */
  backend: Backend;
  clock: Clock;
  /** The part's own child logger. */
  logger: Logger;
  bus: EventBus;
  audit: AuditService;
  pool: WarmPool;
  /** The memory both pools grow into with demand. */
  poolBudget: PoolBudget;
  /** Reusable instances behind fast runs, where the backend can reset one. */
  runPool: RunPool;
  sandboxes: SandboxService;
  exec: ExecService;
  /** The one driver of work due at a time; sources register with it and poke it after writes. */
  timers: DurableTimers;
  /** Encrypts secrets kept in the store. */
  secrets: SecretBox;
}
