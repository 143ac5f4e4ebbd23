import { v7 as uuidv7 } from 'uuid';
import type { Backend } from '../../backends/backend.js';
import type { Logger } from '../../telemetry/logger.js';
import { DEFAULT_LIMITS, defaultDisk } from '../../domain/sandbox-defaults.js';
import type { PoolKey, PooledInstance } from './pool-types.js';

/**
 * What both pools (WarmPool, RunPool) do with their containers: make one with the defaults and
 * role `pool`, destroy one in the background, know which are theirs (`holds`, for the sweep) and
 * wait for the work under way. Each pool keeps its own keys, targets and fills.
 */
export class PoolContainers {
  /** Uuids of every instance made and not yet destroyed nor handed over. */
  private readonly held = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();

  /**
   * `what` names the pool's instances in log lines ('pool instance', 'run instance'); `replica`
   * labels them as this server's, whose pool they are among the replicas of one engine.
   */
  constructor(
    private readonly backend: Backend,
    private readonly logger: Logger,
    private readonly what: string,
    private readonly replica: string,
  ) {}

  /**
   * Makes a running instance of `key` named `name` (reusable for the run pool), with the pool's
   * own `fields` on it; it is held until destroyed.
   */
  async make<F extends object>(key: PoolKey, name: string, reusable: boolean, fields: F): Promise<PooledInstance & F> {
    const uuid = uuidv7();
    this.held.add(uuid);
    try {
      const state = await this.backend.create({
        name,
        uuid,
        image: key.image,
        profile: key.profile,
        ...DEFAULT_LIMITS,
        ...defaultDisk(this.backend),
        env: {},
        role: 'pool',
        replica: this.replica,
        ...(reusable ? { reusable: true } : {}),
      });
      return { name, uuid, key, state, ...fields };
    } catch (err) {
      // A failed create removes what it made.
      this.held.delete(uuid);
      throw err;
    }
  }

  /**
   * Destroys an instance in the background. It is let go either way: one the engine failed to
   * remove is left to the sweep (RecoveryService.sweep).
   */
  discard(instance: PooledInstance): void {
    this.track(
      this.backend
        .remove(instance.state.id)
        .catch((err: Error) => this.logger.warn({ err, container: instance.state.id }, `${this.what} not removed; the sweep will`))
        .finally(() => this.held.delete(instance.uuid)),
    );
  }

  /** Whether the instance is held (made and not yet destroyed nor handed over). */
  holds(uuid: string): boolean {
    return this.held.has(uuid);
  }

  /** Lets go of an instance that is not destroyed: a sandbox owns it now. */
  release(uuid: string): void {
    this.held.delete(uuid);
  }

  /** Counts `work` as under way until it settles. */
  track(work: Promise<unknown>): void {
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }

  /** Resolves once no work is under way. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}
