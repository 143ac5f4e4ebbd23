import type { InstanceState } from '../../backends/backend.js';
import type { CreateSandboxInput, SandboxDetail } from '../../schemas/sandbox-schemas.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';

/** Work done with a sandbox's running container before it stops. */
export type StopHook = (sandbox: SandboxRecord & { backend_id: string }) => Promise<void>;

/** Work done after a sandbox is removed. */
export type RemoveHook = (sandbox: SandboxRecord) => Promise<void>;

/** Work done once a sandbox is created, with what its create asked for. */
export type CreateHook = (sandbox: SandboxRecord, input: CreateSandboxInput) => Promise<void>;

/** A sandbox record whose container exists. */
export type RunningRecord = SandboxRecord & { backend_id: string };

/**
 * What other domains use of the sandboxes domain (SandboxService implements it): the records,
 * their lifecycle and the hooks other domains hang their own work on.
 */
export interface SandboxesApi {
  /** The record of a visible sandbox; NOT_FOUND otherwise. */
  require(name: string): Promise<SandboxRecord>;
  /** The record of a running sandbox; CONFLICT, with its next step, otherwise. */
  requireRunning(name: string): Promise<RunningRecord>;
  /** The record itself when it runs; CONFLICT, with its next step, otherwise. */
  assertRunning(record: SandboxRecord): RunningRecord;
  /** The engine's view of a record's container; null when it has none. */
  observe(record: SandboxRecord): Promise<InstanceState | null>;
  /** Records that a sandbox's container stopped behind the service's back. */
  markStopped(record: SandboxRecord): Promise<void>;
  /** Marks a sandbox active now (idle timeouts count from it). */
  touch(record: SandboxRecord): Promise<void>;
  create(input: CreateSandboxInput, options?: { rootImage?: string; restoredFrom?: string; fromPool?: boolean; internal?: boolean }): Promise<SandboxDetail>;
  start(name: string): Promise<SandboxDetail>;
  stop(name: string): Promise<SandboxDetail>;
  /** Removes a sandbox and its container; answers its uuid. */
  remove(name: string): Promise<string>;
  /** The name of the visible sandbox with this uuid. */
  nameOf(uuid: string): Promise<string | undefined>;
  onBeforeStop(hook: StopHook): void;
  onRemoved(hook: RemoveHook): void;
  onCreated(hook: CreateHook): void;
  /** BAD_REQUEST naming `vcpus` or `memory_mb` when the host cannot give one sandbox this much. */
  checkResources(vcpus: number | undefined, memoryMb: number | undefined): void;
  /** Whether sandboxes with egress `proxy` can reach a proxy; set by the egress domain's wiring. */
  proxyListening: () => boolean;
}
