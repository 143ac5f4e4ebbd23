import type { Backend } from '../../backends/backend.js';
import { badRequest, conflict, notFound } from '../../errors.js';
import { NAME_PATTERN } from '../../schemas/common.js';
import type { SandboxDetail } from '../../schemas/sandbox-schemas.js';
import type { CreateSnapshotInput, SnapshotView } from '../../schemas/snapshot-schemas.js';
import type { SnapshotRecord, SnapshotRepository } from '../../state/snapshot-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditService } from '../events/audit-service.js';
import { isoNow, type Clock } from '../support/clock.js';
import { requireCapability } from '../support/capabilities.js';
import { KeyedMutex } from '../support/keyed-mutex.js';
import { assertTransition } from './lifecycle.js';
import type { SandboxService } from './sandbox-service.js';
import type { ServiceContext } from '../context.js';

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
  private readonly audit: AuditService;
  private readonly clock: Clock;
  private readonly logger: Logger;
  /** Repository part of snapshot image tags: `<prefix>:<snapshot name>`. */
  private readonly snapshotPrefix: string;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'sandboxes' | 'backend' | 'audit' | 'clock' | 'logger' | 'settings'>) {
    this.repo = ctx.repos.snapshots;
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
    this.snapshotPrefix = ctx.settings.snapshotPrefix ?? 'sandboxd-snapshot';
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
      this.sandboxes.locks.run(input.sandbox, async () => {
        const sandbox = await this.sandboxes.require(input.sandbox);
        assertTransition(sandbox, 'snapshot');
        const state = await this.sandboxes.observe(sandbox);
        if (!state) throw conflict(`sandbox '${sandbox.name}' has no container to snapshot: start it first`);
        const record: SnapshotRecord = {
          name: input.name,
          status: 'creating',
          sandbox: sandbox.name,
          sandboxUuid: sandbox.uuid,
          imageTag: `${this.snapshotPrefix}:${input.name}`,
          backend: this.backend.name,
          baseImage: sandbox.image,
          vcpus: sandbox.vcpus,
          memoryMb: sandbox.memoryMb,
          profile: sandbox.profile,
          env: sandbox.env,
          createdAt: isoNow(this.clock),
        };
        if (!(await this.repo.insert(record))) throw conflict(`snapshot '${input.name}' already exists`);
        try {
          await snapshots.snapshot(state.id, record.imageTag, 'snapshot');
        } catch (err) {
          await snapshots.removeImage(record.imageTag).catch((e: unknown) => this.logger.warn({ err: e }, 'could not remove a failed snapshot image'));
          await this.repo.delete(record.name);
          throw err;
        }
        await this.repo.setStatus(record.name, 'ready', ['creating']);
        await this.audit.record('snapshot_created', sandbox, { snapshot: record.name, image_tag: record.imageTag });
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
        { name: target, image: snapshot.baseImage, vcpus: snapshot.vcpus, memory_mb: snapshot.memoryMb, profile: snapshot.profile, env: snapshot.env },
        { rootImage: snapshot.imageTag },
      );
      await this.audit.record('snapshot_restored', { name: sandbox.name, uuid: sandbox.uuid }, { snapshot: name, source: snapshot.sandbox });
      return sandbox;
    });
  }

  /** Deletes the snapshot and its image. */
  async delete(name: string): Promise<string> {
    return this.locks.run(name, async () => {
      const snapshot = await this.require(name);
      await this.repo.setStatus(name, 'deleting', ['ready']);
      await this.backend.capabilities.snapshots?.removeImage(snapshot.imageTag);
      await this.repo.delete(name);
      await this.audit.record('snapshot_deleted', { name: snapshot.sandbox, uuid: snapshot.sandboxUuid }, { snapshot: name });
      return `snapshot '${name}' deleted`;
    });
  }

  private async require(name: string): Promise<SnapshotRecord> {
    const record = await this.repo.byName(name);
    if (!record || record.status !== 'ready') throw notFound(`snapshot '${name}' not found`);
    return record;
  }
}

function viewOf(record: SnapshotRecord): SnapshotView {
  return {
    name: record.name,
    sandbox: record.sandbox,
    image_tag: record.imageTag,
    backend: record.backend,
    base_image: record.baseImage,
    vcpus: record.vcpus,
    memory_mb: record.memoryMb,
    profile: record.profile,
    created_at: record.createdAt,
  };
}
