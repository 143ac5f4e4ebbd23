/**
 * The memory that warm instances may hold in all (`pool.memory_mb`): the warm pool and the run
 * pool grow past their configured sizes with demand only while their instances fit in it (the
 * configured sizes themselves are always kept). Each pool reports what it holds; an instance
 * counts what a waiting one costs the host (IDLE_INSTANCE_MB), not its memory limit, which only
 * a command running in it can reach.
 */
export class PoolBudget {
  private readonly holders: Array<() => number> = [];

  /** `limitMb`: the `pool.memory_mb` setting. */
  constructor(readonly limitMb: number) {}

  /** Registers a pool: `heldMb` says how much memory its instances hold now. */
  track(heldMb: () => number): void {
    this.holders.push(heldMb);
  }

  /** Memory held by every pool's instances now. */
  usedMb(): number {
    return this.holders.reduce((total, held) => total + held(), 0);
  }

  /** Whether one more instance of `mb` fits. */
  allows(mb: number): boolean {
    return this.usedMb() + mb <= this.limitMb;
  }
}
