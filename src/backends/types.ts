/** The data that crosses the Backend interface: what the service asks for and what it gets back. */
import type { SandboxNetwork } from '../domain/egress.js';
import type { Profile } from '../domain/profiles.js';
import type { VolumeMount } from '../domain/volumes.js';

export type { Profile, VolumeMount };

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
  memory_mb: number;
  /**
   * What the instance may write in MiB, over all its writable paths together; only for a
   * backend that declares `diskQuota` (absent: no bound but the storage's own size).
   */
  disk_mb?: number;
  profile: Profile;
  /** Environment of every process in the sandbox (never the server's own environment). */
  env: Record<string, string>;
  /** A git repository cloned into /workspace before the sandbox is handed out. */
  source?: { url: string; ref?: string };
  role?: InstanceRole;
  /** The replica that made a pool instance (role `pool`): only it hands the instance out. */
  replica?: string;
  /**
   * What the instance's network reaches (absent: the profile's default egress); only for a
   * backend that declares `egress`, and only with one of its `modes`.
   */
  network?: SandboxNetwork;
  /**
   * Made to run one command after another (role `pool`), reset between them through the
   * `reuse` capability: its root filesystem is read-only and every writable path is one the
   * reset restores. Only for a backend that declares `reuse`.
   */
  reusable?: boolean;
  /** Named volumes mounted into the instance (only for a backend that declares `volumes`). */
  volumes?: VolumeMount[];
}

/** A named volume as the backend reports it. */
export interface VolumeInfo {
  name: string;
  /** ISO 8601. */
  created_at: string;
}

/** One file as the file views describe it. */
/** What unpacking an archive did: where, how many entries, how many bytes of file content. */
export interface UnpackSummary {
  path: string;
  entries: number;
  bytes: number;
}

export interface FsEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  /** Permission bits in octal, e.g. "0644" (setuid, setgid, sticky included). */
  mode: string;
  /** RFC 3339. */
  mtime: string;
}

/** A directory's entries, sorted by name; `truncated` when there were more than the bound. */
export interface FsListing {
  path: string;
  entries: FsEntry[];
  truncated: boolean;
}

/** One change a watch saw, or a problem it reports (`error`, with `message`). */
export type FsWatchEvent =
  | { event: 'created' | 'modified' | 'deleted'; path: string; type: 'file' | 'dir' }
  | { event: 'error'; message: string };

/** What a backend observes of one instance. */
export interface InstanceState {
  /** Backend-side identifier (the Docker container id). */
  id: string;
  name: string;
  uuid: string;
  role: InstanceRole;
  /** The replica that made it, for a pool instance (SandboxSpec.replica). */
  replica?: string;
  status: 'running' | 'stopped';
  /** Bridge address, only while running and networked. */
  ip?: string;
  /** The OCI runtime in use (runc, runsc). */
  runtime?: string;
  /** When the engine made the instance (ISO 8601), where it says. */
  created_at?: string;
}

/** New limits for `resize`; an absent field keeps its value. */
export interface ResizeRequest {
  vcpus?: number;
  memory_mb?: number;
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
  timeout_ms: number;
  /** Output kept per exec (stdout + stderr); beyond it the output is cut and `truncated` set. */
  max_output_bytes?: number;
  /**
   * Leave running what the command started in the background. Every exec's processes end with
   * it otherwise; only the server sets this, for what it starts itself (Chromium, the relay).
   */
  keep_background?: boolean;
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
  exit_code: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved in arrival order. */
  output: string;
  timed_out: boolean;
  truncated: boolean;
  /** Present (true) when the kernel's OOM killer ended the command (the sandbox's memory limit). */
  oom_killed?: true;
  duration_ms: number;
}

/** A command started with `startDetached`, as its sandbox reports it. */
export interface DetachedProcess {
  /** The backend's id of the process, unique within its sandbox for the sandbox's lifetime. */
  id: string;
  pid: number;
  command: string[];
  /** completed: exited 0; failed: exited non-zero; killed: ended by `killDetached`. */
  status: 'running' | 'completed' | 'failed' | 'killed';
  exit_code: number | null;
  started_at: string;
  /** When it ended (ISO 8601); absent while it runs. */
  finished_at?: string;
}

/** The kept output of one stream of a detached command. */
export interface DetachedLog {
  /** The most recent bytes the stream printed. */
  content: Buffer;
  /** The position of `content`'s first byte in everything the stream printed (earlier ones were dropped). */
  start: number;
}

/** What `startDetached` runs: an exec request without stdin, timeout or output cap. */
export type DetachedRequest = Pick<ExecRequest, 'command' | 'workdir' | 'env' | 'user'>;

/** What a worker runs: an exec request without stdin, timeout or output cap. */
export type WorkerRequest = Pick<ExecRequest, 'command' | 'workdir' | 'env' | 'user'>;

/** A running worker, as its instance reports it. */
export interface WorkerProcess {
  key: string;
  pid: number;
  command: string[];
  /** True when `ensureWorker` started this process just now (false: it was already running). */
  started: boolean;
  started_at: string;
}

/** One call to a worker: a line to its stdin, answered by a line on its stdout. */
export interface WorkerCall {
  /** Marks the answer: the worker's answer line begins with it. */
  nonce: string;
  /** One line of UTF-8 without a newline (the worker's request), up to 32 MiB. */
  line: string;
  timeout_ms: number;
}

export interface WorkerReply {
  /** The answer line, nonce included, without its newline. */
  line: string;
  /**
   * What the worker printed to stderr during the call (the last 64 KiB printed since the
   * previous call ended; for the first call, since the worker started).
   */
  stderr: string;
  /** From the worker's turn for the call to its answer, measured inside the instance (fractional ms). */
  duration_ms: number;
}

/** What a terminal starts: the instance's shell on a pseudo-terminal of this size. */
export interface TerminalRequest {
  cols: number;
  rows: number;
  /** Environment of the shell, over the instance's own (as for an exec). */
  env?: Record<string, string>;
  /** What the terminal prints, as it prints it. */
  onOutput: (data: Buffer) => void;
}

/** A running terminal; its shell's whole process tree is killed by `close` or when it exits. */
export interface TerminalSession {
  /** Bytes typed at the terminal. */
  write(data: Buffer): void;
  resize(cols: number, rows: number): void;
  /** Stops taking output (the terminal, then the shell, block when it fills) until `resume`. */
  pause(): void;
  resume(): void;
  /** The shell's exit code once it exits; null when the session was closed or cut first. */
  readonly exited: Promise<number | null>;
  close(): void;
}
