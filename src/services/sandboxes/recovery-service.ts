import type { Backend, InstanceState } from '../../backends/backend.js';
import type { SandboxRecord, SandboxRepository } from '../../state/sandbox-repository.js';
import type { SnapshotRepository } from '../../state/snapshot-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { archiveTag, lostReason, transition } from './lifecycle.js';
import type { ServiceContext } from '../context.js';

/** A pool instance of another replica that is alive: its pool's, not an orphan. */
const heldByAnother = (instance: InstanceState, others: Set<string>): boolean =>
  instance.role === 'pool' && instance.replica !== undefined && others.has(instance.replica);

/** The sweep leaves younger containers alone: they may be a create under way. */
export const SWEEP_MIN_AGE_MS = 5 * 60_000;

export interface RecoveryReport {
  /** Sandboxes whose status was brought in line with the engine. */
  corrected: string[];
  /** Creates and removals that a crash interrupted, rolled back or finished. */
  rolledBack: string[];
  /** Sandboxes whose container vanished; start makes a new one. */
  lost: string[];
  /** Containers labelled as ours that the store does not know, removed. */
  orphansRemoved: number;
  /** Snapshot and archive images no snapshot or sandbox refers to, removed. */
  imagesRemoved: number;
}

/**
 * Reconciles the store with the engine at start, so that a restart, also after kill -9 at
 * any moment, loses no sandbox and leaks no container:
 * - a create that never finished is rolled back (its container, if any, removed);
 * - a removal that never finished is finished;
 * - every other sandbox takes the status its container has; one whose container is gone
 *   is marked stopped without a container, and start makes a new one;
 * - an archive that never finished is finished when its container is gone (the image is
 *   committed before the container goes), else rolled back;
 * - a snapshot that was being made or deleted is removed with its image;
 * - containers labelled as this instance's but unknown to the store (unclaimed pool instances
 *   among them) are removed, and so are snapshot and archive images that no snapshot or
 *   sandbox refers to.
 */
export class RecoveryService {
  private readonly repo: SandboxRepository;
  private readonly snapshots: SnapshotRepository;
  private readonly backend: Backend;
  private readonly audit: AuditApi;
  private readonly clock: Clock;
  private readonly logger: Logger;

  private readonly replica: ServiceContext['replica'];

  constructor(ctx: Pick<ServiceContext, 'repos' | 'backend' | 'audit' | 'clock' | 'logger' | 'replica'>) {
    this.replica = ctx.replica;
    this.repo = ctx.repos.sandboxes;
    this.snapshots = ctx.repos.snapshots;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
  }

  async reconcile(): Promise<RecoveryReport> {
    const report: RecoveryReport = { corrected: [], rolledBack: [], lost: [], orphansRemoved: 0, imagesRemoved: 0 };
    // Images exist only where the backend makes them (snapshots, archives).
    const images = (await this.backend.capabilities.snapshots?.listImages()) ?? [];
    const instances = await this.backend.list();
    // A sandbox made from a pool instance keeps the role label `pool`: the store says it is a sandbox.
    const byUuid = new Map<string, InstanceState>(instances.filter((i) => i.role !== 'helper').map((i) => [i.uuid, i]));
    const known = new Set<string>();

    for (const record of await this.repo.all()) {
      known.add(record.uuid);
      const instance = byUuid.get(record.uuid);
      if (record.status === 'creating' || record.status === 'removing') {
        if (instance) await this.backend.remove(instance.id);
        else if (record.backend_id) await this.backend.remove(record.backend_id);
        await this.repo.delete(record.uuid);
        report.rolledBack.push(record.name);
        continue;
      }
      if (record.status === 'archiving') {
        await this.resolveArchive(record, instance, images);
        report.rolledBack.push(record.name);
        continue;
      }
      if (record.status === 'archived') continue;
      if (!instance) {
        // A stopped sandbox without a container is a recovered archive, which start makes anew.
        if ((record.backend_id !== null || record.status !== 'stopped') && record.status !== 'lost') {
          const now = isoNow(this.clock);
          await this.repo.update(record.uuid, { status: transition(record, 'lost'), status_reason: lostReason(record.backend_id ?? 'unknown', now), updated_at: now });
          await this.audit.record('sandbox_recovered_from_crash', record, { container: 'missing' });
          report.lost.push(record.name);
        }
        continue;
      }
      if (instance.status !== record.status || instance.id !== record.backend_id) {
        await this.repo.update(record.uuid, { status: transition(record, 'observed', instance.status), backend_id: instance.id, updated_at: isoNow(this.clock) });
        report.corrected.push(record.name);
      }
    }

    const others = await this.replica.othersAlive();
    for (const instance of instances) {
      if (known.has(instance.uuid) && instance.role !== 'helper') continue;
      if (heldByAnother(instance, others)) continue;
      await this.backend.remove(instance.id);
      report.orphansRemoved++;
    }
    report.imagesRemoved = await this.removeUnusedImages(images);
    this.logger.info(report, 'recovery finished');
    return report;
  }

  /**
   * Removes containers of ours that no sandbox owns and `holds` does not claim (the warm pool's),
   * made more than SWEEP_MIN_AGE_MS ago: what a crash's in-flight create made after the
   * start-up reconciliation had looked, or a removal the engine failed. Runs in the background.
   */
  async sweep(holds: (uuid: string) => boolean): Promise<number> {
    const instances = await this.backend.list();
    const cutoff = Date.now() - SWEEP_MIN_AGE_MS;
    const old = instances.filter((i) => i.role !== 'helper' && !holds(i.uuid) && i.created_at !== undefined && Date.parse(i.created_at) < cutoff);
    if (old.length === 0) return 0;
    const others = await this.replica.othersAlive();
    const candidates = old.filter((i) => !heldByAnother(i, others));
    // Read after `holds` was asked: a pool instance handed over meanwhile is in the store by now.
    const known = new Set((await this.repo.all()).map((record) => record.uuid));
    let removed = 0;
    for (const instance of candidates) {
      if (known.has(instance.uuid)) continue;
      await this.backend.remove(instance.id);
      removed++;
    }
    if (removed > 0) this.logger.warn({ removed }, 'removed containers no sandbox owns');
    return removed;
  }

  /** An archive a crash interrupted: finished if the container is gone, else rolled back. */
  private async resolveArchive(record: SandboxRecord, instance: InstanceState | undefined, images: string[]): Promise<void> {
    const now = isoNow(this.clock);
    if (instance) {
      await this.repo.update(record.uuid, { status: transition(record, 'archive_failed', instance.status), backend_id: instance.id, updated_at: now });
      await this.audit.record('sandbox_recovered_from_crash', record, { archive: 'rolled back' });
      return;
    }
    const tag = archiveTag(record.uuid);
    const root_image = images.includes(tag) ? tag : record.root_image;
    const reason = 'archive finished after a restart';
    await this.repo.update(record.uuid, { status: transition(record, 'archived'), backend_id: null, root_image, archived_at: now, archived_reason: reason, updated_at: now });
    await this.audit.record('sandbox_archived', record, { reason });
  }

  /** Finishes snapshots a crash interrupted, then removes every image nothing refers to. */
  private async removeUnusedImages(images: string[]): Promise<number> {
    const used = new Set<string>();
    for (const snapshot of await this.snapshots.all()) {
      if (snapshot.status === 'ready') used.add(snapshot.image_tag);
      else await this.snapshots.delete(snapshot.name);
    }
    for (const record of await this.repo.all()) if (record.root_image) used.add(record.root_image);
    let removed = 0;
    for (const image of images) {
      if (used.has(image)) continue;
      await this.backend.capabilities.snapshots?.removeImage(image);
      removed++;
    }
    return removed;
  }
}
