import { PoolBudget, RunPool, WarmPool } from './index.js';
import type { DomainModule } from '../domain-module.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Pristine instances behind pooled creates (and fast runs where instances cannot be reset). */
    pool: WarmPool;
    /** The memory both pools grow into with demand. */
    poolBudget: PoolBudget;
    /** Reusable instances behind fast runs, where the backend can reset one. */
    runPool: RunPool;
  }
}

/** Pools: warm instances ahead of demand, within one memory budget. */
export const poolsModule = {
  name: 'pools',
  wire(ctx) {
    const poolBudget = new PoolBudget(ctx.config.poolMemoryMb);
    return {
      poolBudget,
      pool: new WarmPool({ ...ctx, poolBudget, logger: ctx.logger.child({ part: 'pool' }) }),
      runPool: new RunPool({ ...ctx, poolBudget, logger: ctx.logger.child({ part: 'run-pool' }) }),
    };
  },
  async close({ pool, runPool }) {
    await pool.close();
    await runPool.close();
  },
  metrics: ['sandboxd_warm_pool_size'],
} satisfies DomainModule;
