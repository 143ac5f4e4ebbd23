/**
 * The Backend interface: the only way the service layer reaches an isolation engine.
 * Backends import nothing from services/, http/ or mcp/.
 */

export const PROFILES = ['permissive', 'moderate', 'restrictive'] as const;
export type Profile = (typeof PROFILES)[number];

/**
 * Role of an instance the backend manages (stored as a label on Docker). `helper` is a
 * short-lived instance a backend makes for itself (e.g. while writing a snapshot image).
 */
export type InstanceRole = 'sandbox' | 'pool' | 'helper';

/** What the service asks a backend to make. */
export interface SandboxSpec {
  name: string;
  uuid: string;
  image: string;
  vcpus: number;
  memoryMb: number;
  profile: Profile;
  /** Environment of every process in the sandbox (never the server's own environment). */
  env: Record<string, string>;
  /** A git repository cloned into /workspace before the sandbox is handed out. */
  source?: { url: string; ref?: string };
  role?: InstanceRole;
}

/** What a backend observes of one instance. */
export interface InstanceState {
  /** Backend-side identifier (the Docker container id). */
  id: string;
  name: string;
  uuid: string;
  role: InstanceRole;
  status: 'running' | 'stopped';
  /** Bridge address, only while running and networked. */
  ip?: string;
  /** The OCI runtime in use (runc, runsc). */
  runtime?: string;
  /** When the engine made the instance (ISO 8601), where it says. */
  createdAt?: string;
}

/** New limits for `resize`; an absent field keeps its value. */
export interface ResizeRequest {
  vcpus?: number;
  memoryMb?: number;
}

/** What an image made by `snapshot` or `archive` holds. */
export type SavedImageKind = 'snapshot' | 'archive';

export interface ExecRequest {
  command: string[];
  workdir?: string;
  env?: Record<string, string>;
  /** User to run as; undefined means the image's default user. `root` for sudo. */
  user?: string;
  stdin?: Buffer;
  timeoutMs: number;
  /** Output kept per exec (stdout + stderr); beyond it the output is cut and `truncated` set. */
  maxOutputBytes?: number;
}

export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

export interface ExecOptions {
  /** Called for every chunk as it arrives, in arrival order. */
  onOutput?: (chunk: OutputChunk) => void;
  /** Aborting kills the command (its whole process tree) and resolves with what it printed. */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved in arrival order. */
  output: string;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
}

/** A command started with `startDetached`, as its sandbox reports it. */
export interface DetachedProcess {
  /** The backend's id of the process, unique within its sandbox for the sandbox's lifetime. */
  id: string;
  pid: number;
  command: string[];
  /** completed: exited 0; failed: exited non-zero or was killed. */
  status: 'running' | 'completed' | 'failed';
  exitCode: number | null;
  startedAt: string;
}

/** What `startDetached` runs: an exec request without stdin, timeout or output cap. */
export type DetachedRequest = Pick<ExecRequest, 'command' | 'workdir' | 'env' | 'user'>;

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
