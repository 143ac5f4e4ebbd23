/**
 * Sandboxes: create, list, inspect, update, start, stop and remove (`SandboxService`); their
 * lifecycle rules as data (`lifecycle.ts`) and the operations on them (`LifecycleService`:
 * archive, recover, resize, extend, gc, reconcile); snapshots; files; and the start-up
 * reconciliation of the store with the backend (`RecoveryService`); file system views and
 * named volumes; images built from a Dockerfile (`ImageService`).
 */
export { FileService } from './file-service.js';
export { FsViewService } from './fs-view-service.js';
export { LifecycleService } from './lifecycle-service.js';
export { RecoveryService, type RecoveryReport } from './recovery-service.js';
export { SandboxService } from './sandbox-service.js';
export { SnapshotService } from './snapshot-service.js';
