import { resolveBuiltImage } from '../../images/deployment-names.js';
import { v7 as uuidv7 } from 'uuid';
import type { Backend, InstanceState, SandboxSpec } from '../../backends/backend.js';
import { validateSource } from '../../backends/source-validation.js';
import { badRequest, conflict, isServiceError, notFound, ServiceError } from '../../errors.js';
import { sandboxDetail, sandboxSummary, type CreateSandboxInput, type PatchSandboxInput, type SandboxDetail, type SandboxSummary } from '../../schemas/sandbox-schemas.js';
import { view } from '../../schemas/view.js';
import type { SandboxRecord, SandboxRepository } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { addDuration } from '../support/durations.js';
import type { Departures } from '../support/departures.js';
import { KeyedMutex } from '../support/keyed-mutex.js';
import { DEFAULT_LIMITS, DEFAULT_PROFILE, defaultDiskMb } from '../../domain/sandbox-defaults.js';
import { requireCapability } from '../support/capabilities.js';
import { checkMounts } from '../volumes/volume-service.js';
import type { PooledInstance } from '../pools/index.js';
import type { WarmPoolApi } from '../pools/api.js';
import { archiveTag, assertTransition, lostReason, transition, VISIBLE_STATUSES } from './lifecycle.js';
import type { ServiceContext } from '../context.js';
import { secretPlaceholders } from './secret-placeholders.js';
import type { HostLimits } from './host-limits.js';
import type { CreateHook, RemoveHook, SandboxesApi, StopHook } from './api.js';

export type { CreateHook, RemoveHook, StopHook } from './api.js';
import { defaultEgress } from '../../domain/egress.js';
import { NetworkRules, networkOfCreate, networkOfPatch, sandboxEgress } from './sandbox-network.js';
import type { Config } from '../../config/config-schema.js';

/**
 * The sandbox domain: create, list, inspect, update, start, stop and remove. Lifecycle
 * operations on one sandbox are serialised by name; statuses are read from the engine so
 * that they stay true when a container stops or vanishes behind the service's back.
 */
export class SandboxService implements SandboxesApi {
  /** Per-name lock of every lifecycle operation; other services take it through `withLock`. */
  private readonly locks = new KeyedMutex();
  private readonly hostCpus: number;
  private readonly hostMemoryMb: number;
  private readonly repo: SandboxRepository;
  private readonly backend: Backend;
  private readonly pool: WarmPoolApi;
  private readonly audit: AuditApi;
  private readonly options: Pick<Config, 'defaultImage' | 'maxSandboxes'>;
  private readonly clock: Clock;
  private readonly logger: Logger;
  /** Names this server's built images (`image: NAME`). */
  private readonly deploymentId: string;
  private readonly stopHooks: StopHook[] = [];
  private readonly removeHooks: RemoveHook[] = [];
  private readonly createHooks: CreateHook[] = [];
  private readonly departures: Departures;
  /** Each running `open` sandbox's own address rules in the backend's packet filter. */
  readonly networkRules: NetworkRules;
  /**
   * Whether sandboxes with egress `proxy` can reach a proxy (the proxy port listens); set by
   * the wiring. Without one such a sandbox would reach nothing at all.
   */
  proxyListening: () => boolean = () => false;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'backend' | 'pool' | 'audit' | 'clock' | 'logger' | 'store' | 'departures'> & { config: Pick<Config, 'defaultImage' | 'maxSandboxes'>; host: HostLimits }) {
    this.repo = ctx.repos.sandboxes;
    this.backend = ctx.backend;
    this.pool = ctx.pool;
    this.audit = ctx.audit;
    this.options = ctx.config;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.deploymentId = ctx.store.deploymentId;
    this.hostCpus = ctx.host.cpus;
    this.hostMemoryMb = ctx.host.memoryMb;
    this.departures = ctx.departures;
    this.networkRules = new NetworkRules(this.repo, this.departures, this.backend, this.logger);
  }

  /**
   * Registers work to do while a sandbox's container still runs, just before it is stopped or
   * archived (the detached commands keep what its agent knows). A failing hook is logged; the
   * stop goes on.
   */
  onBeforeStop(hook: StopHook): void {
    this.stopHooks.push(hook);
  }

  /**
   * Registers work to do once a sandbox is created (keeping what the create asked for beyond
   * the sandbox itself, such as its LLM budget). A failing hook is logged; the sandbox stays.
   */
  onCreated(hook: CreateHook): void {
    this.createHooks.push(hook);
  }

  /** Registers work to do once a sandbox is removed (forgetting what belonged to it). */
  onRemoved(hook: RemoveHook): void {
    this.removeHooks.push(hook);
  }

  /** Runs the `onBeforeStop` hooks for a running container; callers hold the sandbox's lock. */
  async beforeStop(record: SandboxRecord, state: InstanceState | null): Promise<void> {
    if (state?.status !== 'running') return;
    for (const hook of this.stopHooks) {
      try {
        await hook({ ...record, backend_id: state.id });
      } catch (err) {
        this.logger.warn({ err, sandbox: record.name }, 'work before a stop failed; stopping anyway');
      }
    }
  }

  /**
   * Runs `work` under the sandbox's per-name lock, after every lifecycle operation on it
   * already under way: the snapshot and lifecycle services' operations hold it too.
   */
  withLock<T>(name: string, work: () => Promise<T>): Promise<T> {
    return this.locks.run(name, work);
  }

  private builtImage(image: string): Promise<string> {
    const builds = this.backend.capabilities.imageBuild;
    return resolveBuiltImage(image, this.deploymentId, builds && ((reference) => builds.inspect(reference)));
  }

  get backendName(): string {
    return this.backend.name;
  }

  /**
   * Creates and starts a sandbox, from a ready pool instance when one fits (no source, no
   * saved image, `fromPool` not false). `rootImage` makes its filesystem from a saved image (a
   * snapshot) instead of `input.image`, which stays its reported image; `restoredFrom` names
   * that snapshot. `internal`: the server makes it for itself (listed only on request).
   */
  async create(
    input: CreateSandboxInput,
    { rootImage, restoredFrom, fromPool = true, internal = false }: { rootImage?: string; restoredFrom?: string; fromPool?: boolean; internal?: boolean } = {},
  ): Promise<SandboxDetail> {
    const startedAt = performance.now();
    const vcpus = input.vcpus ?? DEFAULT_LIMITS.vcpus;
    const memoryMb = input.memory_mb ?? DEFAULT_LIMITS.memory_mb;
    this.checkResources(vcpus, memoryMb);
    const diskMb = this.diskOf(input.disk_mb);
    if (input.source_ref && !input.source_url) throw badRequest('source_ref: needs source_url');
    if (input.source_url) validateSource({ url: input.source_url, ...(input.source_ref ? { ref: input.source_ref } : {}) });
    const profile = input.profile ?? DEFAULT_PROFILE;
    const network = networkOfCreate(input.network, profile, this.backend);
    if (network?.egress === 'proxy' && !this.proxyListening()) {
      throw badRequest("network.egress: 'proxy' needs the egress proxy, which this server does not run: start it with --proxy (a proxy-mode sandbox reaches nothing else)");
    }
    const volumes = await checkMounts(this.backend, input.volumes);

    const now = isoNow(this.clock);
    // Secrets: the env holds placeholders; the values are stored by the egress service (onCreated).
    const secrets = secretPlaceholders(input.secrets);
    const record: SandboxRecord = {
      uuid: uuidv7(),
      name: input.name,
      status: 'creating',
      backend: this.backend.name,
      backend_id: null,
      // `image: NAME` names a built image of this deployment before it is an engine reference.
      image: rootImage ? (input.image ?? this.options.defaultImage) : await this.builtImage(input.image ?? this.options.defaultImage),
      vcpus,
      memory_mb: memoryMb,
      disk_mb: diskMb ?? null,
      profile,
      labels: input.labels ?? {},
      description: input.description ?? null,
      lifecycle: input.lifecycle ?? null,
      env: { ...input.env, ...secrets?.env },
      source_url: input.source_url ?? null,
      source_ref: input.source_ref ?? null,
      created_at: now,
      updated_at: now,
      last_activity_at: now,
      expires_at: input.ttl ? addDuration(this.clock(), input.ttl, 'ttl').toISOString() : null,
      archived_at: null,
      archived_reason: null,
      status_reason: null,
      root_image: rootImage ?? null,
      restored_from: restoredFrom ?? null,
      secret_mappings: secrets?.mappings ?? null,
      network,
      volumes,
      internal: internal ? 1 : 0,
    };

    return this.locks.run(record.name, async () => {
      if (await this.repo.byName(record.name)) throw conflict(`sandbox '${record.name}' already exists`);
      // A pristine pool instance fits a sandbox that brings no files of its own (source, snapshot),
      // no volumes unless the backend's claim can add mounts, and its profile's default network.
      const needsMounts = record.volumes !== null && !this.backend.capabilities.volumes?.mountsOnClaim;
      const poolable = fromPool && !record.source_url && !record.root_image && !needsMounts && sandboxEgress(record).egress === defaultEgress(record.profile);
      const pooled = poolable ? await this.claimPooled(record) : undefined;
      const created: SandboxRecord = pooled ? { ...record, uuid: pooled.uuid, status: 'running', backend_id: pooled.state.id } : record;
      if (!(await this.repo.insert(created))) {
        if (pooled) this.pool.discard(pooled);
        throw conflict(`sandbox '${record.name}' already exists`);
      }
      let state: InstanceState;
      try {
        await this.checkLimit();
        const make = () => this.backend.create(specOf(created));
        state = pooled ? pooled.state : poolable ? await this.pool.coldStart({ image: record.image, profile: record.profile }, make()) : await make();
      } catch (err) {
        await this.repo.delete(created.uuid);
        if (pooled) this.pool.discard(pooled);
        throw err;
      }
      if (pooled) this.pool.handOver(pooled);
      else await this.repo.update(created.uuid, { status: transition(created, 'created'), backend_id: state.id });
      await this.networkRules.syncAfter(created);
      await this.audit.record('sandbox_created', created, {
        image: created.image,
        backend: created.backend,
        profile: created.profile,
        vcpus,
        memory_mb: memoryMb,
        ...(diskMb !== undefined ? { disk_mb: diskMb } : {}),
        pooled: pooled !== undefined,
        duration_ms: Math.round(performance.now() - startedAt),
      });
      for (const hook of this.createHooks) {
        try {
          await hook(created, input);
        } catch (err) {
          this.logger.error({ err, sandbox: created.name }, 'work after a create failed');
        }
      }
      this.logger.info({ sandbox: created.name, uuid: created.uuid, pooled: pooled !== undefined }, 'sandbox created');
      return detailOf({ ...created, status: 'running', backend_id: state.id }, state);
    });
  }

  /**
   * A ready pool instance of the sandbox's image and profile, made this sandbox (its uuid is
   * the instance's); undefined when none is ready or it cannot become this sandbox.
   */
  private async claimPooled(record: SandboxRecord): Promise<PooledInstance | undefined> {
    // Without claims, pool instances serve runs only.
    const claiming = this.backend.capabilities.poolClaim;
    if (!claiming) return undefined;
    const pooled = this.pool.takeReady({ image: record.image, profile: record.profile });
    if (!pooled) return undefined;
    try {
      await claiming.claim(pooled.state.id, specOf({ ...record, uuid: pooled.uuid }));
      return pooled;
    } catch (err) {
      if (!isServiceError(err)) throw err;
      // UNSUPPORTED (these limits cannot be set in place) leaves the instance pristine: it goes back.
      if (err.code === 'UNSUPPORTED') this.pool.restore(pooled);
      else this.pool.discard(pooled);
      this.logger.debug({ container: pooled.state.id, reason: err.message }, 'pool instance not claimed; creating a sandbox');
      return undefined;
    }
  }

  /**
   * Visible sandboxes with every label filter (key:value) and, where given, one of `statuses` (as
   * observed now); the server's own (internal) ones only when `internal` is true.
   */
  async list(labelFilters: string[] = [], statuses: string[] = [], internal = false): Promise<SandboxSummary[]> {
    const wanted = labelFilters.map(parseLabelFilter);
    const records = (await this.repo.all()).filter(
      (r) => isVisible(r) && (internal || r.internal === 0) && wanted.every(([k, v]) => r.labels[k] === v),
    );
    const observed = new Map((await this.backend.list()).map((s) => [s.uuid, s]));
    const summaries = await Promise.all(records.map(async (r) => summaryOf(await this.reconcile(r, observed.get(r.uuid) ?? null), observed.get(r.uuid))));
    return statuses.length === 0 ? summaries : summaries.filter((s) => statuses.includes(s.status));
  }

  async get(name: string): Promise<SandboxDetail> {
    const record = await this.require(name);
    const state = await this.observe(record);
    return detailOf(await this.reconcile(record, state), state ?? undefined);
  }

  async getByUuid(uuid: string): Promise<SandboxDetail> {
    const record = await this.repo.byUuid(uuid);
    if (!record || !isVisible(record)) throw notFound(`sandbox with uuid '${uuid}' not found`);
    return this.get(record.name);
  }

  /**
   * Changes a sandbox's metadata and expiry (`ttl` sets it to now + ttl, `expires_at: null`
   * clears it); answers with the whole sandbox as it is after.
   */
  async update(name: string, patch: PatchSandboxInput): Promise<SandboxDetail> {
    return this.locks.run(name, async () => {
      const record = await this.require(name);
      // Metadata only: a status changes through the lifecycle transitions (lifecycle.ts).
      const changes: Partial<Omit<SandboxRecord, 'status'>> = { updated_at: isoNow(this.clock) };
      if (patch.labels !== undefined) changes.labels = patch.labels;
      if (patch.description !== undefined) changes.description = patch.description;
      if (patch.lifecycle !== undefined) changes.lifecycle = patch.lifecycle;
      if (patch.ttl !== undefined) changes.expires_at = addDuration(this.clock(), patch.ttl, 'ttl').toISOString();
      if (patch.expires_at === null) changes.expires_at = null;
      if (patch.network !== undefined) changes.network = networkOfPatch(record, patch.network);
      await this.repo.update(record.uuid, changes);
      // Applied at once: the packet filter now (open), the proxy at its next request (proxy).
      if (changes.network) await this.networkRules.sync();
      await this.audit.record('sandbox_updated', record, { fields: Object.keys(patch), ...(changes.expires_at !== undefined ? { expires_at: changes.expires_at } : {}) });
      const state = await this.observe(record);
      return detailOf({ ...record, ...changes }, state ?? undefined);
    });
  }

  /**
   * Starts a sandbox's container, or makes one from its settings where it has none: a
   * recovered archive (its files are in the archive image), or a lost sandbox, whose container
   * was removed outside sandboxd; the answer then says `recreated: true`, since its files are gone.
   */
  async start(name: string): Promise<SandboxDetail> {
    return this.locks.run(name, async () => {
      const record = await this.require(name);
      assertTransition(record, 'start');
      let state = await this.observe(record);
      const wasRunning = state?.status === 'running';
      const lost = record.status === 'lost' || (record.backend_id !== null && !state);
      if (!state) {
        state = await this.backend.create(specOf(record));
      } else if (!wasRunning) {
        state = await this.backend.start(state.id, { name: record.name });
      }
      const now = isoNow(this.clock);
      const changes = { status: transition(record, 'start'), status_reason: null, backend_id: state.id, last_activity_at: now, updated_at: now };
      await this.repo.update(record.uuid, changes);
      // A new address: the sandbox's own rules move with it.
      await this.networkRules.syncAfter(record);
      if (lost) await this.audit.record('sandbox_recreated', record, { reason: record.status_reason ?? 'its container was gone' });
      if (!wasRunning) await this.audit.record('sandbox_started', record);
      return { ...detailOf({ ...record, ...changes }, state), ...(lost ? { recreated: true } : {}) };
    });
  }

  async stop(name: string): Promise<SandboxDetail> {
    return this.locks.run(name, async () => {
      const record = await this.require(name);
      assertTransition(record, 'stop');
      if (record.status === 'archived' || record.status === 'lost') return detailOf(record);
      const state = await this.observe(record);
      if (record.backend_id && !state) return detailOf(await this.markLost(record, record.backend_id));
      await this.beforeStop(record, state);
      if (state?.status === 'running') await this.backend.stop(state.id);
      const now = isoNow(this.clock);
      await this.repo.update(record.uuid, { status: transition(record, 'stop'), updated_at: now });
      await this.networkRules.syncAfter(record);
      if (record.status !== 'stopped' || state?.status === 'running') await this.audit.record('sandbox_stopped', record);
      return detailOf({ ...record, status: 'stopped', updated_at: now }, state ? { ...state, status: 'stopped' } : undefined);
    });
  }

  /**
   * Deletes the record, which frees the name at once, and answers; the engine removes the
   * container in the background (`Departures`), its archive image after it, and the packet
   * filter drops its rules only once it is gone.
   */
  async remove(name: string): Promise<string> {
    return this.locks.run(name, async () => {
      const record = await this.require(name);
      assertTransition(record, 'remove');
      await this.departures.depart(record, {
        deleteRecord: () => this.repo.delete(record.uuid),
        removeContainer: async () => {
          if (record.backend_id) await this.backend.remove(record.backend_id);
          // An archive image belongs to its sandbox; a restored snapshot's image to the snapshot.
          if (record.root_image === archiveTag(record.uuid)) await this.backend.capabilities.snapshots?.removeImage(record.root_image);
        },
        afterwards: () => this.networkRules.syncAfter(record),
      });
      for (const hook of this.removeHooks) await hook(record);
      await this.audit.record('sandbox_removed', record);
      this.logger.info({ sandbox: name, uuid: record.uuid }, 'sandbox removed');
      return `sandbox '${name}' removed`;
    });
  }

  /** The name of the visible sandbox with this uuid, if any: a stored read, no engine call. */
  async nameOf(uuid: string): Promise<string | undefined> {
    const record = await this.repo.byUuid(uuid);
    return record && isVisible(record) ? record.name : undefined;
  }

  /** The stored record of a visible sandbox, or NOT_FOUND. */
  async require(name: string): Promise<SandboxRecord> {
    const record = await this.repo.byName(name);
    if (!record || !isVisible(record)) throw notFound(`sandbox '${name}' not found`);
    return record;
  }

  /**
   * The record of a sandbox that must be running for an operation (exec, files).
   * CONFLICT otherwise, with the next step (start it, or recover and start it) as its hint.
   */
  async requireRunning(name: string): Promise<SandboxRecord & { backend_id: string }> {
    return this.assertRunning(await this.require(name));
  }

  /** The record itself when it is running; CONFLICT with the next step as its hint otherwise. */
  assertRunning(record: SandboxRecord): SandboxRecord & { backend_id: string } {
    const name = record.name;
    if (record.status === 'running' && record.backend_id) return record as SandboxRecord & { backend_id: string };
    throw record.status === 'archived'
      ? conflict(`sandbox '${name}' is archived`, { hint: { action: 'recover', sandbox: name, then: 'start' } })
      : conflict(`sandbox '${name}' is ${record.status}`, { hint: { action: 'start', sandbox: name } });
  }

  /** Marks a sandbox stopped after the engine reported its container not running. */
  async markStopped(record: SandboxRecord): Promise<void> {
    await this.repo.update(record.uuid, { status: transition(record, 'observed', 'stopped'), updated_at: isoNow(this.clock) }, ['running']);
  }

  /** Records activity (exec, files) on a sandbox. */
  async touch(record: SandboxRecord): Promise<void> {
    await this.repo.update(record.uuid, { last_activity_at: isoNow(this.clock) });
  }

  /** BAD_REQUEST when the host cannot give a sandbox this many cpus or this much memory. */
  checkResources(vcpus: number | undefined, memoryMb: number | undefined): void {
    if (vcpus !== undefined && vcpus > this.hostCpus) throw badRequest(`vcpus: at most ${this.hostCpus} on this host`);
    if (memoryMb !== undefined && memoryMb > this.hostMemoryMb) throw badRequest(`memory_mb: at most ${this.hostMemoryMb} on this host`);
  }

  /**
   * The disk_mb a new sandbox gets: the request's, checked against the engine's storage, or the
   * default; undefined where the backend bounds no disk (then a requested one is UNSUPPORTED).
   */
  private diskOf(requested: number | undefined): number | undefined {
    if (requested === undefined) return defaultDiskMb(this.backend);
    const storageMb = requireCapability(this.backend, 'diskQuota').storageMb;
    if (requested > storageMb) throw badRequest(`disk_mb: at most ${storageMb} (the size of the engine's storage)`);
    return requested;
  }

  private async checkLimit(): Promise<void> {
    const max = this.options.maxSandboxes;
    if (max > 0 && (await this.repo.count()) > max) {
      throw new ServiceError('LIMIT_REACHED', `sandbox limit reached (${max}): remove a sandbox or raise --max-sandboxes`);
    }
  }

  /** What the engine observes of the sandbox's container; null when it has none. */
  async observe(record: SandboxRecord): Promise<InstanceState | null> {
    return record.backend_id ? this.backend.inspect(record.backend_id) : null;
  }

  /**
   * Brings the stored status in line with what the engine observed: a sandbox whose container
   * the engine no longer has is lost.
   */
  private async reconcile(record: SandboxRecord, state: InstanceState | null): Promise<SandboxRecord> {
    if (record.status !== 'running' && record.status !== 'stopped') return record;
    if (!state && record.backend_id) return this.markLost(record, record.backend_id);
    const status = state?.status ?? 'stopped';
    if (status === record.status) return record;
    await this.repo.update(record.uuid, { status: transition(record, 'observed', status) }, [record.status]);
    return { ...record, status };
  }

  /** Records that a sandbox's container was removed outside sandboxd, and why it is `lost`. */
  private async markLost(record: SandboxRecord, container: string): Promise<SandboxRecord> {
    const now = isoNow(this.clock);
    const changes = { status: transition(record, 'lost'), status_reason: lostReason(container, now), updated_at: now };
    await this.repo.update(record.uuid, changes, [record.status]);
    await this.audit.record('sandbox_lost', record, { container });
    this.logger.warn({ sandbox: record.name, container }, 'sandbox lost: its container was removed outside sandboxd');
    return { ...record, ...changes };
  }
}

const isVisible = (r: SandboxRecord) => VISIBLE_STATUSES.includes(r.status);

function parseLabelFilter(filter: string): [string, string] {
  const at = filter.indexOf(':');
  if (at <= 0) throw badRequest(`label: '${filter}' must look like key:value`);
  return [filter.slice(0, at), filter.slice(at + 1)];
}

/** The backend spec that (re)creates a sandbox's container. */
export function specOf(record: SandboxRecord): SandboxSpec {
  return {
    name: record.name,
    uuid: record.uuid,
    image: record.root_image ?? record.image,
    vcpus: record.vcpus,
    memory_mb: record.memory_mb,
    ...(record.disk_mb !== null ? { disk_mb: record.disk_mb } : {}),
    profile: record.profile,
    env: record.env,
    ...(record.network ? { network: record.network } : {}),
    ...(record.source_url ? { source: { url: record.source_url, ...(record.source_ref ? { ref: record.source_ref } : {}) } } : {}),
    ...(record.volumes?.length ? { volumes: record.volumes } : {}),
  };
}

/**
 * The record with what the API shows beyond it: the address while the sandbox runs and the
 * OCI runtime while its container exists (only the engine knows either). Statuses seen here are
 * the visible ones (`creating` and `removing` sandboxes are never shown).
 */
function shown(record: SandboxRecord, state?: InstanceState) {
  return {
    ...record,
    status: record.status as SandboxSummary['status'],
    ip: record.status === 'running' && state?.ip ? state.ip : undefined,
    runtime: state?.runtime,
    network: sandboxEgress(record),
    internal: record.internal === 1 ? (true as const) : undefined,
  };
}

function summaryOf(record: SandboxRecord, state?: InstanceState): SandboxSummary {
  return view(sandboxSummary, shown(record, state));
}

/** The API view of a sandbox with its metadata. */
export function detailOf(record: SandboxRecord, state?: InstanceState): SandboxDetail {
  return view(sandboxDetail, shown(record, state));
}
