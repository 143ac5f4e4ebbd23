/**
 * Pools: instances made ahead of demand, per (image, profile) key. The warm pool of pristine
 * instances behind pooled creates (and fast runs where instances cannot be reset) (`WarmPool`),
 * the reusable instances behind fast runs (`RunPool`), the per-key bookkeeping both share
 * (`KeyedPool`: keys admitted on demand, sizes and targets, idle eviction, close) and the memory
 * both grow into (`PoolBudget`). Sandboxes claim from the warm pool; runs take from either.
 */
export { KeyedPool, DEMAND_WINDOW_MS, POOL_IDLE_MS } from './keyed-pool.js';
export { MAX_ON_DEMAND_KEYS } from './pool-keys.js';
export { PoolBudget } from './pool-budget.js';
export { type PoolKey, type PoolSize, type PooledInstance, type TakenInstance } from './pool-types.js';
export { MAX_RUNS_PER_INSTANCE, RunPool } from './run-pool.js';
export { WarmPool } from './warm-pool.js';
