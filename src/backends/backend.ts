/**
 * The Backend interface: the only way the service layer reaches an isolation engine. A backend
 * is a small core (what every engine can do) plus the optional capabilities it declares, each an
 * object that is present or absent. Backends import nothing from services/, http/ or mcp/.
 */
import type { Duplex, Readable } from 'node:stream';
import type {
  SandboxSpec,
  InstanceState,
  ResizeRequest,
  SavedImageKind,
  ExecRequest,
  ExecOptions,
  ExecResult,
  DetachedLog,
  DetachedProcess,
  DetachedRequest,
  WorkerRequest,
  WorkerCall,
  WorkerReply,
  WorkerProcess,
  FsEntry,
  FsListing,
  FsWatchEvent,
  UnpackSummary,
  VolumeInfo,
  TerminalRequest,
  TerminalSession,
} from './types.js';

import type { EgressMode } from '../domain/egress.js';

export type * from './types.js';

/** The core: what every backend offers. */
export interface Backend {
  readonly name: string;
  /** The optional features this backend offers; an absent one answers UNSUPPORTED in the services. */
  readonly capabilities: BackendCapabilities;
  /** OCI runtimes available (e.g. ['runc', 'runsc']); known once `ping()` has reached the engine. */
  runtimes(): string[];
  /** Throws BACKEND_UNAVAILABLE when the engine cannot be reached. */
  ping(): Promise<void>;
  /** Makes sure an image is present (pulling it if possible); IMAGE_UNAVAILABLE otherwise. */
  ensureImage(image: string): Promise<void>;
  /** Creates and starts an instance; it is running when this resolves. */
  create(spec: SandboxSpec): Promise<InstanceState>;
  /**
   * Starts a stopped instance. `spec` names the sandbox it holds: its hostname is the
   * sandbox's name again after the start (an engine may restore the one the instance was made
   * with, a warm-pool instance's).
   */
  start(id: string, spec?: Pick<SandboxSpec, 'name'>): Promise<InstanceState>;
  stop(id: string): Promise<void>;
  /** Removes the instance and everything it holds; a missing instance is not an error. */
  remove(id: string): Promise<void>;
  /** null when the instance no longer exists. */
  inspect(id: string): Promise<InstanceState | null>;
  /** Every instance this backend manages for this service (with role and uuid), for recovery. */
  list(): Promise<InstanceState[]>;
  exec(id: string, request: ExecRequest, options?: ExecOptions): Promise<ExecResult>;
  /** NOT_FOUND for a missing file, BAD_REQUEST for a directory. */
  readFile(id: string, path: string): Promise<Buffer>;
  /**
   * A file's bytes as a stream, of any size, held in memory only as the reader takes them;
   * the same refusals as `readFile`, before the first byte. Destroying the stream ends the read.
   */
  readFileStream(id: string, path: string): Promise<Readable>;
  /** Creates parent directories; the file is owned by the sandbox's default user. */
  writeFile(id: string, path: string, content: Buffer): Promise<void>;
  /** NOT_FOUND for a missing file. */
  deleteFile(id: string, path: string): Promise<void>;
  /** Releases connections and timers. */
  close(): Promise<void>;
}

/** The optional features, by name; services reach them through `requireCapability`. */
export interface BackendCapabilities {
  snapshots?: SnapshotCapability;
  archive?: ArchiveCapability;
  resize?: ResizeCapability;
  poolClaim?: PoolClaimCapability;
  detached?: DetachedCapability;
  browserRelay?: BrowserRelayCapability;
  reuse?: ReuseCapability;
  workers?: WorkersCapability;
  diskQuota?: DiskQuotaCapability;
  gateway?: GatewayCapability;
  fileViews?: FileViewsCapability;
  fileArchives?: FileArchivesCapability;
  volumes?: VolumesCapability;
  imageBuild?: ImageBuildCapability;
  terminal?: TerminalCapability;
  egress?: EgressCapability;
  ports?: PortsCapability;
}

export type CapabilityName = keyof BackendCapabilities;

/** Every capability name, in the order /status lists them. */
export const CAPABILITY_NAMES = ['snapshots', 'archive', 'resize', 'poolClaim', 'detached', 'browserRelay', 'reuse', 'workers', 'diskQuota', 'gateway', 'terminal', 'egress', 'fileViews', 'fileArchives', 'volumes', 'ports', 'imageBuild'] as const satisfies readonly CapabilityName[];

/**
 * An address of the host that every networked instance reaches and the server can bind to: the
 * server listens there for what it offers instances (the LLM gateway, the egress proxy).
 */
export interface GatewayCapability {
  /**
   * The host's address on the network of instances with this egress (default `open`; Docker:
   * the gateway of sandboxd's own bridge network, or of its internal proxy network).
   */
  gatewayAddress(egress?: 'open' | 'proxy'): Promise<string>;
}

/**
 * Enforced egress (DECISIONS-WAVE2 5.4): `create` honours `SandboxSpec.network.egress` (`open`:
 * a network of the backend's own where instances reach neither each other, nor the host's
 * addresses, nor link-local ones; `proxy`: a network whose only reachable address is the
 * exposed port of the gateway; `none`: no network), enforced outside the instance (Docker: its
 * networks and the host's packet filter; Kubernetes: NetworkPolicy).
 */
export interface EgressCapability {
  /** The egress modes `create` accepts. */
  readonly modes: readonly EgressMode[];
  /** The port of the gateway address that instances reach although the host is closed to them (the proxy port); undefined closes it. */
  exposePort(port: number | undefined): Promise<void>;
  /**
   * Replaces every instance's own address rules at once: `allow` opens (to an `open` instance)
   * addresses and ranges the backend blocks, `deny` closes ones it lets through; deny wins.
   * Entries are CIDR ranges (`parseNetworkEntry`), each with an optional port after its prefix
   * (`192.0.2.2/32:8080`: that port alone, TCP and UDP); host names are the proxy's business.
   */
  setRules(rules: InstanceRules[]): Promise<void>;
  /** The address ranges of the instances' networks (what the proxy must refuse as a destination). */
  ranges(): Promise<string[]>;
}

/** One instance's address rules (see `EgressCapability.setRules`). */
export interface InstanceRules {
  id: string;
  allow: string[];
  deny: string[];
}

/**
 * A byte stream to a TCP port inside an instance, opened from within it (the Docker backend:
 * through its agent), so that servers bound to the instance's loopback only and instances
 * without a network are reached too. The preview proxy speaks HTTP over it.
 */
export interface PortsCapability {
  /**
   * Connects to `port` (1-65535) of the instance as a program inside it would (its loopback).
   * NOT_FOUND / CONFLICT for a missing or stopped instance; BAD_GATEWAY when nothing listens.
   */
  connectPort(id: string, port: number): Promise<Duplex>;
}

/**
 * A bound on what an instance writes: `create` honours `SandboxSpec.disk_mb` over every writable
 * path of the instance (its writable layer and its tmpfs mounts), and a write past it fails
 * inside the instance (EDQUOT or ENOSPC) while the instance lives on.
 */
export interface DiskQuotaCapability {
  /** Size of the storage instances write to, in MiB: the most disk_mb one instance may be given. */
  readonly storageMb: number;
}

/** An image built from a Dockerfile, as the engine holds it. */
export interface BuiltImage {
  tag: string;
  id: string;
  sizeBytes: number;
  createdAt: string;
  /** Its ONBUILD triggers (they run in a build FROM it), where it has any. */
  onBuild?: string[];
}

/** The label of every engine object a build makes (its value is the build's id). */
export const BUILD_LABEL = 'sandboxd.build';

/** The bounds of one image build (`[images]` settings). */
export interface ImageBuildLimits {
  /** Most processes its steps hold at once. */
  pids: number;
  /** CPU weight of its steps (a sandbox has 1024). */
  cpuShares: number;
  /** Bytes one step may write, and all its steps together. */
  stepDiskBytes: number;
  diskBytes: number;
}

/**
 * What {@link ImageBuildCapability.build} builds: a context (a tar holding the Dockerfile) under
 * `tag`. The Dockerfile labels each stage `BUILD_LABEL=buildId` (after each FROM), so that the
 * build's intermediate images and containers are found by it (`sweep`).
 */
export interface ImageBuildRequest {
  buildId: string;
  limits: ImageBuildLimits;
  tag: string;
  /** A tar archive; the Dockerfile is the entry `dockerfile` names. */
  context: Buffer;
  dockerfile: string;
  labels: Record<string, string>;
  /** Aborted when the client leaves: the build stops and leaves nothing. */
  signal?: AbortSignal;
}

/**
 * Images built from a Dockerfile by the engine, offline: base images must be present locally
 * (nothing is pulled) and build steps have no network. A failed or aborted build leaves no
 * image or container behind; its error (BAD_REQUEST) carries the log in `details.log`.
 */
export interface ImageBuildCapability {
  /** Builds and tags the image; each log chunk goes to `onLog` as the engine reports it. */
  build(request: ImageBuildRequest, onLog: (text: string) => void): Promise<BuiltImage>;
  /** The engine's image under a reference, without pulling; undefined when absent. */
  inspect(reference: string): Promise<BuiltImage | undefined>;
  /** Images carrying `label` (any value), newest first. */
  listLabelled(label: string): Promise<Array<BuiltImage & { labels: Record<string, string> }>>;
  /** Removes the tag (and the image when nothing else holds it); a missing tag is not an error. */
  remove(tag: string): Promise<void>;
  /**
   * Removes what a build that did not end (the server was killed in it) left: its containers and
   * untagged images (`BUILD_LABEL=buildId`) and what it set up on the host.
   */
  sweep(buildId: string): Promise<{ containers: number; images: number }>;
  /** Tags the image `source` (a tag or id) as `tag` too. */
  tag(source: string, tag: string): Promise<void>;
}

/** Saved images of an instance's whole filesystem, and the images this backend made. */
export interface SnapshotCapability {
  /**
   * Keeps the instance's whole filesystem, /workspace included (also where it is a tmpfs), as
   * image `tag`; consistent while the instance runs (it is paused meanwhile). An existing tag
   * moves to the new image.
   */
  snapshot(id: string, tag: string, kind: SavedImageKind): Promise<void>;
  /** Removes an image made by `snapshot` or `archive`; a missing image is not an error. */
  removeImage(tag: string): Promise<void>;
  /** Tags of every image this backend made by `snapshot`/`archive` for this service. */
  listImages(): Promise<string[]>;
}

/**
 * Archiving: the instance's filesystem is kept as image `tag` (as `snapshot` does) and the
 * instance is stopped and removed; `create` with `image: tag` brings it back with its files.
 * The image is one of the saved images, so a backend that archives also offers `snapshots`.
 */
export interface ArchiveCapability {
  archive(id: string, tag: string): Promise<void>;
}

/** New cpu and memory limits, in place while the instance runs (UNSUPPORTED where its runtime cannot). */
export interface ResizeCapability {
  resize(id: string, request: ResizeRequest): Promise<void>;
}

/** A warm pool instance becomes a sandbox without a new create. */
export interface PoolClaimCapability {
  /**
   * Makes a running instance created with role `pool` the sandbox `spec` (same uuid, image and
   * profile): it takes the sandbox's name and limits. The sandbox's env is not applied here:
   * the service passes it with every command. CONFLICT when the instance no longer runs,
   * UNSUPPORTED when its limits cannot change in place; either way the instance is untouched.
   */
  claim(id: string, spec: SandboxSpec): Promise<void>;
}

/**
 * Commands that outlive the request (and the server): the sandbox keeps them and their last
 * output. UNSUPPORTED where one instance cannot (a Docker sandbox without its agent).
 */
export interface DetachedCapability {
  startDetached(id: string, request: DetachedRequest): Promise<DetachedProcess>;
  /** Every detached command the instance knows, oldest first (a restarted instance knows none). */
  listDetached(id: string): Promise<DetachedProcess[]>;
  /** The last output of one stream of a detached command; NOT_FOUND for an unknown id. */
  detachedLogs(id: string, processId: string, stream: 'stdout' | 'stderr'): Promise<DetachedLog>;
  /** Kills a detached command's process tree (it then reads as `killed`); NOT_FOUND for an unknown id. */
  killDetached(id: string, processId: string): Promise<void>;
}

/**
 * The server's way to a TCP port that a program in the sandbox binds to its own loopback only
 * (Chromium's debugging port): only the server may connect through it.
 */
export interface BrowserRelayCapability {
  /**
   * Makes `port` on the instance's loopback reachable from the server, if it is not yet, and
   * returns the base URL to use (`http://host:port`). CONFLICT when the instance has no
   * network address, UNSUPPORTED when its image lacks what the relay needs.
   */
  relay(id: string, port: number): Promise<string>;
}

/**
 * One instance, many runs: an instance created with `reusable: true` is brought back to the
 * state it had when it was made, between one command and the next, and that state is checked.
 */
export interface ReuseCapability {
  /**
   * Kills every process of the instance, removes every IPC object, restores every writable
   * path, the limits and the rest a command could change, then checks all of it again.
   * Resolves when the instance is as it was made; CONFLICT (naming what is left over) when it
   * is not, or the instance is not reusable: such an instance must not run anything again.
   */
  reset(id: string): Promise<void>;
}

/**
 * Long-lived processes inside an instance that answer one line per call over their stdin and
 * stdout (the persistent workers behind durable objects): a call costs a pipe round trip instead
 * of an interpreter start. The instance supervises them; the server restarts one that failed.
 */
export interface WorkersCapability {
  /**
   * Starts worker `key` unless one with the same request already runs (a different request
   * replaces it). Resolves once the process runs; `started` says whether a new one was started.
   * NOT_FOUND / CONFLICT as `exec` for a missing or stopped instance; BAD_REQUEST for a key
   * that is not one (worker-rules.ts) or an empty command; LIMIT_REACHED past 64 workers; a
   * worker that cannot start fails as a shell would, `WorkerFailed` with reason `exited` and
   * exit code 127 (no such program) or 126 (cannot run it, unknown user, missing workdir).
   * UNSUPPORTED for an instance that cannot run workers (a Docker sandbox whose agent predates them).
   */
  ensureWorker(id: string, key: string, request: WorkerRequest): Promise<WorkerProcess>;
  /**
   * Writes `call.line` and a newline to the worker's stdin and resolves with the first line it
   * prints to stdout that begins with `call.nonce` (calls to one worker run one at a time).
   * Past `call.timeout_ms` the worker's process tree is killed and the call fails with TIMEOUT
   * (`details.stderr`); a worker that exits, or prints a line to stdout that does not begin
   * with the nonce, is killed and the call fails with `WorkerFailed` (errors.ts). Either way
   * the next call needs `ensureWorker`. NOT_FOUND when no worker `key` runs (one that ended
   * between calls included); BAD_REQUEST for a bad nonce or timeout or a line holding a
   * newline, PAYLOAD_TOO_LARGE for a line over 32 MiB (nothing reaches the worker).
   */
  callWorker(id: string, key: string, call: WorkerCall): Promise<WorkerReply>;
  /** Kills worker `key`'s process tree; a missing worker is not an error. */
  stopWorker(id: string, key: string): Promise<void>;
  /** The workers the instance runs now (a restarted instance runs none). */
  listWorkers(id: string): Promise<WorkerProcess[]>;
}

/**
 * Views of an instance's file system, as its default user sees them: listings, stat and watches.
 * NOT_FOUND for a missing path, BAD_REQUEST for a listing of what is not a directory,
 * FORBIDDEN where the user may not look; NOT_FOUND / CONFLICT as `exec` for the instance.
 */
export interface FileViewsCapability {
  /** A directory's entries sorted by name, at most 10,000 (`truncated` beyond). */
  listDirectory(id: string, path: string): Promise<FsListing>;
  /** One path, not followed when it is a symbolic link. */
  stat(id: string, path: string): Promise<FsEntry>;
  /**
   * Watches a path (with `recursive`, every directory below it): resolves once the watch is in
   * place (the refusals above come before), then yields events coalesced per path until
   * `signal` aborts (which ends the watch inside the instance) or the path is deleted.
   */
  watch(id: string, path: string, options: { recursive: boolean; signal: AbortSignal }): Promise<AsyncIterable<FsWatchEvent>>;
}

/**
 * Directories as tar archives, packed and unpacked as the sandbox's default user: what a copy of
 * a directory in or out of a sandbox takes in one call. NOT_FOUND for a missing directory,
 * BAD_REQUEST for a path that is not one (packing) and for an archive refused whole or in part
 * (an entry outside the directory or through a symbolic link, a device, a damaged archive),
 * FORBIDDEN where the user may not read or write; NOT_FOUND / CONFLICT as `exec` for the instance.
 */
export interface FileArchivesCapability {
  /** A tar of what the directory holds (names relative to it; sockets and devices left out), streamed. */
  packDirectory(id: string, path: string): Promise<Readable>;
  /** Unpacks a tar into the directory, made with its parents; files and links are replaced, directories merged. */
  unpackInto(id: string, path: string, archive: Buffer): Promise<UnpackSummary>;
}

/**
 * Named volumes: storage that outlives the instances that mount it (`SandboxSpec.volumes`).
 * Volume names are the service's own (the backend keeps them apart from other users' volumes).
 */
export interface VolumesCapability {
  /** CONFLICT when it exists. */
  createVolume(name: string): Promise<VolumeInfo>;
  listVolumes(): Promise<VolumeInfo[]>;
  /** null when there is no such volume. */
  inspectVolume(name: string): Promise<VolumeInfo | null>;
  /** NOT_FOUND when there is none; CONFLICT while an instance (running or not) mounts it. */
  removeVolume(name: string): Promise<void>;
  /**
   * Whether `claim` can give a pool instance these mounts; when not, a sandbox with volumes is
   * created fresh rather than claimed.
   */
  readonly mountsOnClaim: boolean;
}

/** Interactive shells on a pseudo-terminal inside an instance, as its default user in its workdir. */
export interface TerminalCapability {
  /**
   * Starts the instance's shell (bash where it has one, else sh) on a terminal of the requested
   * size; resolves once it runs. NOT_FOUND / CONFLICT as `exec` for a missing or stopped
   * instance; UNSUPPORTED where the instance cannot (a Docker sandbox without the agent).
   */
  openTerminal(id: string, request: TerminalRequest): Promise<TerminalSession>;
}

/** Whether `backend` declares capability `name`. */
export function hasCapability(backend: Backend, name: CapabilityName): boolean {
  return backend.capabilities[name] !== undefined;
}

/** The names of the capabilities `backend` declares, in `CAPABILITY_NAMES` order. */
export function capabilityNames(backend: Backend): CapabilityName[] {
  return CAPABILITY_NAMES.filter((name) => hasCapability(backend, name));
}
