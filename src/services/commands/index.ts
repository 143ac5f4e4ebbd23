/**
 * Commands: exec in a sandbox (`ExecService`), one-shot runs and batches (`RunService`), the
 * warm pool of pristine instances behind pooled creates (and fast runs where instances cannot
 * be reset) (`WarmPool`), the reusable instances behind fast runs (`RunPool`), the memory both
 * grow into (`PoolBudget`), detached commands that outlive their request (`DetachedService`),
 * and interactive terminals (`TerminalService`).
 */
export { DetachedService } from './detached-service.js';
export { ExecService } from './exec-service.js';
export { TerminalService, type Terminal } from './terminal-service.js';
export { RunService, type RunStage } from './run-service.js';
export { WarmPool, type PoolSize } from './warm-pool.js';
export { PoolBudget } from './pool-budget.js';
export { RunPool } from './run-pool.js';
