/**
 * Durable stores: records, credentials and the query / execute / command envelope over one
 * engine per kind (`StoreEngine`, store-engine.ts). `StoreService` is the API; its `handles` is
 * the DurableTimers source that closes idle connections. The engines live in a folder each under
 * `engines/` (sqlite, kv, queue, postgres, mysql, redis; `embedded/` holds what kv and queue
 * share, `external/` what the three servers share); engine-registry.ts makes one of each.
 */
export { StoreService, mergePatch, type StoreMetrics, type StoreServiceInput } from './store-service.js';
export { StoreHandles, HANDLE_IDLE_MS } from './store-handles.js';
export { storeEngines, type StoreEnginesInput } from './engine-registry.js';
export { MAX_RESPONSE_BYTES } from './store-results.js';
export { MASK, hostAllowed } from './store-credentials.js';
export {
  STORE_KINDS,
  type CommandRequest,
  type ExecuteRequest,
  type QueryRequest,
  type RowSet,
  type StatementResult,
  type StoreEngine,
  type StoreHandle,
  type StoreKind,
  type StoreOp,
  type StoreParams,
  type StoreTarget,
} from './store-engine.js';
