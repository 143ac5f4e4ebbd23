import type { Backend } from '../../backends/backend.js';
import { conflict } from '../../errors.js';
import type { ReconcileResult, ResizeInput } from '../../schemas/lifecycle-schemas.js';
import type { SandboxDetail } from '../../schemas/sandbox-schemas.js';
import type { SandboxRepository } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { requireCapability } from '../support/capabilities.js';
import { addDuration, parseDuration } from '../support/durations.js';
import { archiveTag, assertTransition, planAction, transition, TRANSITIONS, type PlannedAction } from './lifecycle.js';
import { detailOf, type SandboxService } from './sandbox-service.js';
import type { ServiceContext } from '../context.js';

/** TTL extension when `by` is not given (docs/decisions.md, "Sandboxes"). */
export const DEFAULT_EXTENSION = '1h';

/**
 * The lifecycle beyond create/start/stop/remove: archive and recover, resize, time to live
 * (extend, gc) and lifecycle policies (reconcile). Every operation on a sandbox holds the
 * sandbox service's per-name lock and moves the stored status as lifecycle.ts allows.
 */
export class LifecycleService {
  private readonly repo: SandboxRepository;
  private readonly sandboxes: SandboxService;
  private readonly backend: Backend;
  private readonly audit: AuditApi;
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(ctx: Pick<ServiceContext, 'repos' | 'backend' | 'audit' | 'clock' | 'logger'> & { sandboxes: SandboxService }) {
    this.repo = ctx.repos.sandboxes;
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.clock = ctx.clock;
    this.logger = ctx.logger;
  }

  /**
   * Keeps the sandbox's filesystem as an image and releases its container. The status is
   * `archiving` meanwhile; recovery finishes or rolls back an archive a crash interrupted.
   */
  async archive(name: string, reason: string): Promise<SandboxDetail> {
    const archiving = requireCapability(this.backend, 'archive');
    return this.sandboxes.withLock(name, async () => {
      const record = await this.sandboxes.require(name);
      assertTransition(record, 'archive');
      const state = await this.sandboxes.observe(record);
      // Conditional on the rule's statuses, not on the one read: a concurrent read may have
      // just corrected running to stopped from the engine, which changes nothing here.
      const inFlight = { ...record, status: transition(record, 'archive') };
      if (!(await this.repo.update(record.uuid, { status: inFlight.status }, TRANSITIONS.archive.from))) {
        throw conflict(`sandbox '${name}' changed while it was being archived: try again`);
      }
      const tag = archiveTag(record.uuid);
      try {
        await this.sandboxes.beforeStop(record, state);
        if (state) await archiving.archive(state.id, tag);
      } catch (err) {
        await this.repo.update(record.uuid, { status: transition(inFlight, 'archive_failed', record.status) }, ['archiving']);
        throw err;
      }
      const now = isoNow(this.clock);
      // Without a container there was nothing new to keep: its files are where they were.
      const archived = { status: transition(inFlight, 'archived'), backend_id: null, root_image: state ? tag : record.root_image, archived_at: now, archived_reason: reason, updated_at: now };
      await this.repo.update(record.uuid, archived, ['archiving']);
      await this.audit.record('sandbox_archived', record, { reason });
      this.logger.info({ sandbox: name, reason }, 'sandbox archived');
      return detailOf({ ...record, ...archived });
    });
  }

  /** Clears the archive metadata of an archived sandbox (status stopped); CONFLICT otherwise. */
  async recover(name: string): Promise<SandboxDetail> {
    return this.sandboxes.withLock(name, async () => {
      const record = await this.sandboxes.require(name);
      assertTransition(record, 'recover');
      const now = isoNow(this.clock);
      const recovered = { status: transition(record, 'recover'), archived_at: null, archived_reason: null, status_reason: null, last_activity_at: now, updated_at: now };
      await this.repo.update(record.uuid, recovered, ['archived']);
      await this.audit.record('sandbox_recovered', record, { archived_at: record.archived_at });
      return detailOf({ ...record, ...recovered });
    });
  }

  /** New cpu/memory limits: in place on a running sandbox, kept for the next start of a stopped one. */
  async resize(name: string, input: ResizeInput): Promise<SandboxDetail> {
    this.sandboxes.checkResources(input.vcpus, input.memory_mb);
    const resizing = requireCapability(this.backend, 'resize');
    await this.sandboxes.withLock(name, async () => {
      const record = await this.sandboxes.require(name);
      assertTransition(record, 'resize');
      const state = await this.sandboxes.observe(record);
      if (state) await resizing.resize(state.id, input);
      const changes = { vcpus: input.vcpus ?? record.vcpus, memory_mb: input.memory_mb ?? record.memory_mb, updated_at: isoNow(this.clock) };
      await this.repo.update(record.uuid, changes);
      await this.audit.record('sandbox_resized', record, {
        from: { vcpus: record.vcpus, memory_mb: record.memory_mb },
        to: { vcpus: changes.vcpus, memory_mb: changes.memory_mb },
        in_place: state?.status === 'running',
      });
    });
    return this.sandboxes.get(name);
  }

  /**
   * Moves an expiry to max(expires_at, now) + by. A sandbox without one keeps none (extend
   * never schedules a removal): it answers expires_at null; PATCH ttl sets an expiry.
   */
  async extend(name: string, by: string = DEFAULT_EXTENSION): Promise<{ expires_at: string | null }> {
    return this.sandboxes.withLock(name, async () => {
      const record = await this.sandboxes.require(name);
      assertTransition(record, 'extend');
      const now = this.clock();
      // A bad duration is refused also where there is nothing to move.
      parseDuration(by);
      if (!record.expires_at) return { expires_at: null };
      const current = new Date(record.expires_at);
      const expires_at = addDuration(current > now ? current : now, by).toISOString();
      await this.repo.update(record.uuid, { expires_at, updated_at: now.toISOString() });
      await this.audit.record('sandbox_extended', record, { by, expires_at });
      return { expires_at };
    });
  }

  /** Removes every sandbox whose `expires_at` has passed. */
  async gc(): Promise<{ removed: string[]; count: number }> {
    const now = this.clock().getTime();
    const removed: string[] = [];
    for (const record of await this.repo.all()) {
      if (!record.expires_at || Date.parse(record.expires_at) > now) continue;
      if (!['running', 'stopped', 'lost', 'archived'].includes(record.status)) continue;
      try {
        await this.audit.record('sandbox_expired', record, { expires_at: record.expires_at });
        await this.sandboxes.remove(record.name);
        removed.push(record.name);
      } catch (err) {
        this.logger.warn({ err, sandbox: record.name }, 'could not remove an expired sandbox');
      }
    }
    return { removed, count: removed.length };
  }

  /**
   * Applies every lifecycle policy whose threshold has passed (or, with `dryRun`, only lists
   * what it would do). A sandbox whose state changed since the plan is left for the next round.
   */
  async reconcile(dryRun = false): Promise<ReconcileResult> {
    const now = this.clock();
    const actions = (await this.repo.all()).map((r) => planAction(r, now)).filter((a): a is PlannedAction => a !== null);
    const result: ReconcileResult = { dry_run: dryRun, actions: actions.map(({ sandbox, action, reason }) => ({ sandbox, action, reason })), stopped: [], archived: [], removed: [] };
    if (dryRun) return result;
    for (const planned of actions) {
      try {
        const fresh = await this.repo.byName(planned.sandbox);
        if (!fresh || planAction(fresh, this.clock())?.action !== planned.action) continue;
        await this.apply(planned);
        (planned.action === 'stop' ? result.stopped : planned.action === 'archive' ? result.archived : result.removed).push(planned.sandbox);
      } catch (err) {
        this.logger.warn({ err, sandbox: planned.sandbox, action: planned.action }, 'lifecycle action failed');
      }
    }
    return result;
  }

  private async apply(planned: PlannedAction): Promise<void> {
    const reason = `lifecycle policy: ${planned.reason}`;
    if (planned.action === 'stop') await this.sandboxes.stop(planned.sandbox);
    else if (planned.action === 'archive') await this.archive(planned.sandbox, reason);
    else await this.sandboxes.remove(planned.sandbox);
  }
}
