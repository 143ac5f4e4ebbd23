import { snapshotTag } from '../../images/deployment-names.js';
import type { Backend } from '../../backends/backend.js';
import { badRequest, conflict, notFound } from '../../errors.js';
import { NAME_PATTERN } from '../../schemas/common.js';
import type { SandboxDetail } from '../../schemas/sandbox-schemas.js';
import { snapshot as snapshotView, type CreateSnapshotInput, type SnapshotView } from '../../schemas/snapshot-schemas.js';
import { view } from '../../schemas/view.js';
import type { SnapshotRecord, SnapshotRepository } from '../../state/snapshot-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { requireCapability } from '../support/capabilities.js';
import { KeyedMutex } from '../support/keyed-mutex.js';
import { assertTransition } from './lifecycle.js';
import type { SandboxService } from './sandbox-service.js';
import type { Departures } from '../support/departures.js';
import type { ServiceContext } from '../context.js';
import type { Config } from '../../config/config-schema.js';

/** Settings of the snapshot service. */
/**
 * Snapshots: a sandbox's whole filesystem and settings kept as an image, restorable as new
 * sandboxes. A snapshot row is written as `creating` before the image and marked `deleting`
 * before the image goes, so that recovery can finish or undo either after a crash.
 */
export class SnapshotService {
  /** Per snapshot name; sandboxes are locked through the sandbox service's lock. */
  private readonly locks = new KeyedMutex();

  private readonly repo: SnapshotRepository;
  private readonly sandboxes: SandboxService;
  private readonly backend: Backend;
  private readonly audit: AuditApi;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly departures: Departures;
  /** Repository part of snapshot image tags: `<prefix>/<deployment id>:<snapshot name>`. */
  private readonly snapshotPrefix: string;
  private readonly deploymentId: string;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'backend' | 'audit' | 'clock' | 'logger' | 'store' | 'departures'> & { sandboxes: SandboxService } & { config: Pick<Config, 'snapshotPrefix'> }) {
    this.repo = ctx.repos.snapshots;
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.departures = ctx.departures;
    this.snapshotPrefix = ctx.config.snapshotPrefix;
    this.deploymentId = ctx.store.deploymentId;
  }

  async list(): Promise<SnapshotView[]> {
    return (await this.repo.all()).filter((s) => s.status === 'ready').map(viewOf);
  }

  async get(name: string): Promise<SnapshotView> {
    return viewOf(await this.require(name));
  }

  /** Snapshots a running or stopped sandbox (201); CONFLICT for a taken name or an archived sandbox. */
  async create(input: CreateSnapshotInput): Promise<SnapshotView> {
    const snapshots = requireCapability(this.backend, 'snapshots');
    return this.locks.run(input.name, () =>
      this.sandboxes.withLock(input.sandbox, async () => {
        const sandbox = await this.sandboxes.require(input.sandbox);
        assertTransition(sandbox, 'snapshot');
        const state = await this.sandboxes.observe(sandbox);
        if (!state) throw conflict(`sandbox '${sandbox.name}' has no container to snapshot: start it first`);
        const record: SnapshotRecord = {
          name: input.name,
          status: 'creating',
          sandbox: sandbox.name,
          sandbox_uuid: sandbox.uuid,
          image_tag: snapshotTag(this.snapshotPrefix, this.deploymentId, input.name),
          backend: this.backend.name,
          base_image: sandbox.image,
          vcpus: sandbox.vcpus,
          memory_mb: sandbox.memory_mb,
          disk_mb: sandbox.disk_mb,
          profile: sandbox.profile,
          env: sandbox.env,
          created_at: isoNow(this.clock),
          labels: sandbox.labels,
          description: sandbox.description,
          volumes: sandbox.volumes,
        };
        if (!(await this.repo.insert(record))) throw conflict(`snapshot '${input.name}' already exists`);
        try {
          await snapshots.snapshot(state.id, record.image_tag, 'snapshot');
        } catch (err) {
          await snapshots.removeImage(record.image_tag).catch((e: unknown) => this.logger.warn({ err: e }, 'could not remove a failed snapshot image'));
          await this.repo.delete(record.name);
          throw err;
        }
        await this.repo.setStatus(record.name, 'ready', ['creating']);
        await this.audit.record('snapshot_created', sandbox, { snapshot: record.name, image_tag: record.image_tag });
        this.logger.info({ snapshot: record.name, sandbox: sandbox.name }, 'snapshot created');
        return viewOf(record);
      }),
    );
  }

  /** A new running sandbox with the snapshot's files and settings (201), named `as_name`. */
  async restore(name: string, asName?: string): Promise<SandboxDetail> {
    return this.locks.run(name, async () => {
      const snapshot = await this.require(name);
      const target = asName ?? `${snapshot.sandbox}-restored`;
      if (!NAME_PATTERN.test(target)) throw badRequest(`as_name: the default '${target}' is not a valid name; give as_name`);
      const sandbox = await this.sandboxes.create(
        {
          name: target,
          image: snapshot.base_image,
          vcpus: snapshot.vcpus,
          memory_mb: snapshot.memory_mb,
          ...(snapshot.disk_mb !== null ? { disk_mb: snapshot.disk_mb } : {}),
          profile: snapshot.profile,
          env: snapshot.env,
          labels: snapshot.labels,
          ...(snapshot.description !== null ? { description: snapshot.description } : {}),
        },
        { rootImage: snapshot.image_tag, restoredFrom: snapshot.name },
      );
      await this.audit.record('snapshot_restored', { name: sandbox.name, uuid: sandbox.uuid }, { snapshot: name, source: snapshot.sandbox });
      return sandbox;
    });
  }

  /** Deletes the snapshot and its image (once no departing container was made from it). */
  async delete(name: string): Promise<string> {
    return this.locks.run(name, async () => {
      const snapshot = await this.require(name);
      await this.departures.settled((sandbox) => sandbox.root_image === snapshot.image_tag);
      await this.repo.setStatus(name, 'deleting', ['ready']);
      await this.backend.capabilities.snapshots?.removeImage(snapshot.image_tag);
      await this.repo.delete(name);
      await this.audit.record('snapshot_deleted', { name: snapshot.sandbox, uuid: snapshot.sandbox_uuid }, { snapshot: name });
      return `snapshot '${name}' deleted`;
    });
  }

  private async require(name: string): Promise<SnapshotRecord> {
    const record = await this.repo.byName(name);
    if (!record || record.status !== 'ready') throw notFound(`snapshot '${name}' not found`);
    return record;
  }
}

/** The API view of a snapshot: its record's fields the response schema declares. */
function viewOf(record: SnapshotRecord): SnapshotView {
  const volumes = record.volumes ?? [];
  const note = volumes.length > 0 ? `not included: the contents of volume${volumes.length > 1 ? 's' : ''} ${volumes.map((v) => `'${v.name}' (${v.path})`).join(', ')}; a restored sandbox mounts no volumes` : undefined;
  return view(snapshotView, { ...record, note });
}
