/**
 * The Backend interface: the only way the service layer reaches an isolation engine.
 * Backends import nothing from services/, http/ or mcp/.
 */
import type {
  SandboxSpec,
  InstanceState,
  ResizeRequest,
  SavedImageKind,
  ExecRequest,
  ExecOptions,
  ExecResult,
  DetachedProcess,
  DetachedRequest
} from './types.js';

export type * from './types.js';

export interface BackendCapabilities {
  snapshot: boolean;
  resize: boolean;
  archive: boolean;
  browser: boolean;
  /** OCI runtimes available (e.g. ['runc', 'runsc']). */
  runtimes: string[];
}

export interface Backend {
  readonly name: string;
  capabilities(): BackendCapabilities;
  /** Throws BACKEND_UNAVAILABLE when the engine cannot be reached. */
  ping(): Promise<void>;
  /** Makes sure an image is present (pulling it if possible); IMAGE_UNAVAILABLE otherwise. */
  ensureImage(image: string): Promise<void>;
  /** Creates and starts an instance; it is running when this resolves. */
  create(spec: SandboxSpec): Promise<InstanceState>;
  /**
   * Makes a running instance created with role `pool` the sandbox `spec` (same uuid, image and
   * profile): it takes the sandbox's name and limits. The sandbox's env is not applied here:
   * the service passes it with every command. CONFLICT when the instance no longer runs,
   * UNSUPPORTED when its limits cannot change in place; either way the instance is untouched.
   */
  claim(id: string, spec: SandboxSpec): Promise<void>;
  start(id: string): Promise<InstanceState>;
  stop(id: string): Promise<void>;
  /** Removes the instance and everything it holds; a missing instance is not an error. */
  remove(id: string): Promise<void>;
  /** null when the instance no longer exists. */
  inspect(id: string): Promise<InstanceState | null>;
  /** Every instance this backend manages for this service, for reconciliation. */
  list(): Promise<InstanceState[]>;
  exec(id: string, request: ExecRequest, options?: ExecOptions): Promise<ExecResult>;
  /** NOT_FOUND for a missing file, BAD_REQUEST for a directory. */
  readFile(id: string, path: string): Promise<Buffer>;
  /** Creates parent directories; the file is owned by the sandbox's default user. */
  writeFile(id: string, path: string, content: Buffer): Promise<void>;
  /** NOT_FOUND for a missing file. */
  deleteFile(id: string, path: string): Promise<void>;
  /**
   * Starts a command that outlives the request (and the server): the sandbox keeps it and its
   * last output. UNSUPPORTED where the instance cannot (a Docker sandbox without its agent).
   */
  startDetached(id: string, request: DetachedRequest): Promise<DetachedProcess>;
  /** Every detached command the instance knows, oldest first (a restarted instance knows none). */
  listDetached(id: string): Promise<DetachedProcess[]>;
  /** The last output of one stream of a detached command; NOT_FOUND for an unknown id. */
  detachedLogs(id: string, processId: string, stream: 'stdout' | 'stderr'): Promise<Buffer>;
  /** Kills a detached command's process tree; NOT_FOUND for an unknown id. */
  killDetached(id: string, processId: string): Promise<void>;
  /**
   * Keeps the instance's whole filesystem, /workspace included (also where it is a tmpfs), as
   * image `tag`; consistent while the instance runs (it is paused meanwhile). An existing tag
   * moves to the new image. UNSUPPORTED unless `capabilities().snapshot`.
   */
  snapshot(id: string, tag: string, kind: SavedImageKind): Promise<void>;
  /**
   * Archives an instance: its filesystem is kept as image `tag` (as `snapshot` does) and the
   * instance is stopped and removed. `create` with `image: tag` brings it back with its files.
   * UNSUPPORTED unless `capabilities().archive`.
   */
  archive(id: string, tag: string): Promise<void>;
  /** Removes an image made by `snapshot`/`archive`; a missing image is not an error. */
  removeImage(tag: string): Promise<void>;
  /** Tags of every image this backend made by `snapshot`/`archive` for this service. */
  listImages(): Promise<string[]>;
  /**
   * Changes the cpu and memory limits of an instance, in place while it runs.
   * UNSUPPORTED unless `capabilities().resize` (or where the instance's runtime cannot).
   */
  resize(id: string, request: ResizeRequest): Promise<void>;
  /** Releases connections and timers. */
  close(): Promise<void>;
}
