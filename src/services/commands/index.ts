/**
 * Commands: exec in a sandbox (`ExecService`), one-shot runs and batches (`RunService`, on
 * instances of the pools in services/pools/), detached commands that outlive their request
 * (`DetachedService`), and interactive terminals (`TerminalService`).
 */
export { DetachedService } from './detached-service.js';
export { ExecService } from './exec-service.js';
export { RunService, type RunStage } from './run-service.js';
