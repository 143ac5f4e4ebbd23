import type { Backend } from '../backends/backend.js';
import type { z } from 'zod';
import type { Config } from '../config/config-schema.js';
import type { serverStats, serverStatus } from '../schemas/service-schemas.js';
import type { AuditEntry, AuditRepository } from '../state/audit-repository.js';
import type { BrowserEventRepository } from '../state/browser-event-repository.js';
import type { DetachedRepository } from '../state/detached-repository.js';
import type { LlmRepository } from '../state/llm-repository.js';
import type { ObjectRepository } from '../state/object-repository.js';
import type { OrchestrationRepository } from '../state/orchestration-repository.js';
import type { PolicyRepository } from '../state/policy-repository.js';
import type { ProxyRepository } from '../state/proxy-repository.js';
import type { SandboxRepository } from '../state/sandbox-repository.js';
import type { ScheduleRepository } from '../state/schedule-repository.js';
import type { SnapshotRepository } from '../state/snapshot-repository.js';
import type { StoreRepository } from '../state/store-repository.js';
import type { Store } from '../state/store.js';
import type { Logger } from '../telemetry/logger.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { DurableTimers } from './durable/durable-timers.js';
import type { ExecApi, RunsApi } from './commands/api.js';
import type { AuditApi } from './events/api.js';
import type { EventBus } from './events/event-bus.js';
import type { Observability } from './events/observability.js';
import type { RunPoolApi, WarmPoolApi } from './pools/api.js';
import type { SandboxesApi } from './sandboxes/api.js';
import type { HostLimits } from './sandboxes/host-limits.js';
import type { Clock } from './support/clock.js';
import type { Departures } from './support/departures.js';
import type { SecretBox } from './support/secret-box.js';

/** This server as a replica: its id, and the other replicas alive now (their pool instances are theirs). */
export interface ReplicaView {
  id: string;
  othersAlive(): Promise<Set<string>>;
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
 * What every domain is built from, made once by services.ts before any domain is wired.
 * `config` is the parsed config whole, every default applied by the schema: a service types the
 * sections it reads with `ConfigSection` and never defaults them again.
 */
export interface ServiceBase {
  config: Config;
  repos: Repositories;
  /** The backend as every service sees it: observed (timings, spans). */
  backend: Backend;
  clock: Clock;
  /** The part's own child logger. */
  logger: Logger;
  bus: EventBus;
  metrics: Metrics;
  /** Encrypts secrets kept in the store. */
  secrets: SecretBox;
  /**
   * The state store: its data directory (stores' files, host figures), and its database, where
   * a domain with tables of its own builds its repository; the deployment id, which names the
   * engine objects of this server (snapshot and built images).
   */
  store: Pick<Store, 'db' | 'sql' | 'dataDir' | 'deploymentId'>;
  /** The server's environment (LLM keys given as `env`). */
  env: NodeJS.ProcessEnv;
  /** The one driver of work due at a time; sources register with it and poke it after writes. */
  timers: DurableTimers;
  /** Removed sandboxes whose container the engine still removes in the background. */
  departures: Departures;
  /** This server among the replicas of its database: its id labels its pool instances. */
  replica: ReplicaView;
  /** What a server is given beyond its config (tests: host limits, test doubles). */
  inputs: ServiceInputs;
}

/**
 * Parts given to the service layer instead of the real ones, beyond the config (tests,
 * benchmarks); a domain adds its own by declaration merging, like `ServiceParts`.
 */
export interface ServiceInputs {
  /** The host's cpus and memory that vcpus and memory_mb are checked against; default this host's. */
  hostLimits?: HostLimits;
}

/** What the faces see of the service layer beyond the domains' parts. */
export interface ServiceCore {
  readonly backend: Backend;
  readonly observability: Observability;
  /** GET /status. */
  status(): z.infer<typeof serverStatus>;
  /** GET /stats. */
  stats(): Promise<z.infer<typeof serverStats>>;
  /** Audit entries of one sandbox, oldest first. */
  logs(name: string): Promise<AuditEntry[]>;
  close(): Promise<void>;
}

/**
 * Every domain's services, by name. It is empty here: each domain's `module.ts` adds what it
 * builds by declaration merging (`declare module '../context.js' { interface ServiceParts ... }`),
 * so that this file imports no domain and no domain's types import each other through it.
 */
export interface ServiceParts {}

/**
 * Everything a part of the service layer may be built from: the base and the parts of the
 * domains wired before it. Each part's constructor takes the `Pick` of it that it uses, by
 * name, so that the compiler checks the wiring and no constructor has positional arguments.
 */
export type ServiceContext = ServiceBase & Omit<ServiceParts, keyof DomainApis> & DomainApis;

/**
 * The parts other domains use through an interface declared beside their domain (`api.ts`),
 * never through the class that implements it: a domain that takes `sandboxes` from the
 * context sees `SandboxesApi`. The faces see the classes (`ServiceApi`).
 */
export interface DomainApis {
  sandboxes: SandboxesApi;
  audit: AuditApi;
  pool: WarmPoolApi;
  runPool: RunPoolApi;
  exec: ExecApi;
  runs: RunsApi;
}

/** What a domain's `wire` receives: the context as far as it has been built. */
export type WiringContext = ServiceContext;

/** The service layer as the faces (HTTP routes) see it. */
export type ServiceApi = ServiceCore & ServiceParts;
