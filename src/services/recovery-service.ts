import type { Backend, InstanceState } from '../backends/backend.js';
import type { SandboxRepository } from '../state/sandbox-repository.js';
import type { Logger } from '../telemetry/logger.js';
import type { AuditService } from './audit-service.js';
import { isoNow, type Clock } from './clock.js';

export interface RecoveryReport {
  /** Sandboxes whose status was brought in line with the engine. */
  corrected: string[];
  /** Creates and removals that a crash interrupted, rolled back or finished. */
  rolledBack: string[];
  /** Sandboxes whose container vanished; start makes a new one. */
  lost: string[];
  /** Containers labelled as ours that the store does not know, removed. */
  orphansRemoved: number;
}

/**
 * Reconciles the store with the engine at start, so that a restart, also after kill -9 at
 * any moment, loses no sandbox and leaks no container:
 * - a create that never finished is rolled back (its container, if any, removed);
 * - a removal that never finished is finished;
 * - every other sandbox takes the status its container has; one whose container is gone
 *   is marked stopped without a container, and start makes a new one;
 * - containers labelled as this instance's but unknown to the store are removed.
 */
export class RecoveryService {
  constructor(
    private readonly repo: SandboxRepository,
    private readonly backend: Backend,
    private readonly audit: AuditService,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async reconcile(): Promise<RecoveryReport> {
    const report: RecoveryReport = { corrected: [], rolledBack: [], lost: [], orphansRemoved: 0 };
    const instances = await this.backend.list();
    const byUuid = new Map<string, InstanceState>(instances.filter((i) => i.role === 'sandbox').map((i) => [i.uuid, i]));
    const known = new Set<string>();

    for (const record of await this.repo.all()) {
      known.add(record.uuid);
      const instance = byUuid.get(record.uuid);
      if (record.status === 'creating' || record.status === 'removing') {
        if (instance) await this.backend.remove(instance.id);
        else if (record.backendId) await this.backend.remove(record.backendId);
        await this.repo.delete(record.uuid);
        report.rolledBack.push(record.name);
        continue;
      }
      if (record.status === 'archived') continue;
      if (!instance) {
        if (record.backendId !== null || record.status !== 'stopped') {
          await this.repo.update(record.uuid, { status: 'stopped', backendId: null, updatedAt: isoNow(this.clock) });
          await this.audit.record('sandbox_recovered_from_crash', record, { container: 'missing' });
          report.lost.push(record.name);
        }
        continue;
      }
      if (instance.status !== record.status || instance.id !== record.backendId) {
        await this.repo.update(record.uuid, { status: instance.status, backendId: instance.id, updatedAt: isoNow(this.clock) });
        report.corrected.push(record.name);
      }
    }

    for (const instance of instances) {
      if (known.has(instance.uuid) && instance.role === 'sandbox') continue;
      await this.backend.remove(instance.id);
      report.orphansRemoved++;
    }
    this.logger.info(report, 'recovery finished');
    return report;
  }
}
