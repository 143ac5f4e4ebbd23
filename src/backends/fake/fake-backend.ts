import { posix } from 'node:path';
import type { Duplex } from 'node:stream';
import { Readable } from 'node:stream';
import { badRequest, conflict, notFound, ServiceError, UnsupportedError } from '../../errors.js';
import type {
  ArchiveCapability,
  Backend,
  BackendCapabilities,
  CapabilityName,
  DetachedCapability,
  EgressCapability,
  GatewayCapability,
  PortsCapability,
  DetachedLog,
  DetachedProcess,
  DetachedRequest,
  ExecOptions,
  ExecRequest,
  ExecResult,
  InstanceRules,
  InstanceState,
  PoolClaimCapability,
  ResizeCapability,
  ResizeRequest,
  SandboxSpec,
  SavedImageKind,
  ReuseCapability,
  SnapshotCapability,
  WorkerCall,
  WorkerProcess,
  WorkerReply,
  WorkerRequest,
  WorkersCapability,
  FileArchivesCapability,
  FileViewsCapability,
  FsEntry,
  FsListing,
  FsWatchEvent,
  UnpackSummary,
  VolumeInfo,
  VolumesCapability,
} from '../backend.js';
import type { EgressMode } from '../../domain/egress.js';
import { fakeListing, fakePack, fakeStat, fakeUnpack, FakeVolumes, FakeWatches } from './fake-fs-views.js';
import { DEFAULT_IMAGE } from '../../images/catalog.js';
import { OutputCollector } from '../output-collector.js';
import { connectTcp } from '../tcp-connect.js';
import { checkWorkerCall, checkWorkerKey, checkWorkerRequest } from '../worker-rules.js';
import { FakeWorkers, type FakeWorker, type FakeWorkerHandler } from './fake-workers.js';

export type { FakeWorkerAnswer, FakeWorkerHandler } from './fake-workers.js';

interface FakeInstance {
  state: InstanceState;
  /** Its address while it runs. */
  ip: string;
  spec: SandboxSpec;
  files: Map<string, Buffer>;
  detached: FakeDetached[];
  /** Its workers, by key; they end when it stops, restarts, is reset or removed. */
  workers: Map<string, FakeWorker>;
}

interface FakeDetached {
  process: DetachedProcess;
  output: { stdout: string; stderr: string };
}

/** What a scripted exec prints and returns. */
export interface FakeExecScript {
  chunks?: { stream: 'stdout' | 'stderr'; text: string }[];
  exit_code?: number;
  /** Resolves only when aborted or timed out, like a command that never ends. */
  hang?: boolean;
  /** Ends as the kernel's OOM killer ends a command: exit 137, oom_killed. */
  oom?: boolean;
}

type Operation =
  | 'create'
  | 'claim'
  | 'start'
  | 'stop'
  | 'remove'
  | 'exec'
  | 'list'
  | 'inspect'
  | 'snapshot'
  | 'archive'
  | 'resize'
  | 'removeImage'
  | 'startDetached'
  | 'listDetached'
  | 'reset'
  | 'ensureWorker'
  | 'callWorker'
  | 'stopWorker'
  | 'listWorkers'
  | 'connectPort';

/** The capabilities the fake can have: all but the browser relay and terminals, which need a real browser and a real terminal. */
export type FakeCapability = Exclude<CapabilityName, 'browserRelay' | 'terminal'>;

/** The capabilities a FakeBackend declares unless told otherwise. */
const DEFAULT_CAPABILITIES: readonly FakeCapability[] = ['snapshots', 'archive', 'resize', 'poolClaim', 'gateway', 'egress', 'fileViews', 'fileArchives', 'volumes'];

/**
 * An in-memory backend for unit tests of the service layer. It is scriptable: exec
 * answers come from `onExec`, and `failNext` makes the next call of an operation throw.
 * Each capability but the browser relay (which needs a real browser) can be declared or
 * omitted, so that tests reach both the feature and its UNSUPPORTED answer. Workers answer
 * through `scriptWorker` (an echo by default), and `workerStarts` counts the workers started.
 * It is never evidence that a real feature works.
 */
export class FakeBackend
  implements
    Backend,
    SnapshotCapability,
    ArchiveCapability,
    ResizeCapability,
    PoolClaimCapability,
    DetachedCapability,
    ReuseCapability,
    WorkersCapability,
    GatewayCapability,
    FileArchivesCapability,
    EgressCapability,
    FileViewsCapability,
    VolumesCapability,
    PortsCapability
{
  readonly name = 'fake';
  /** The storage size a declared `diskQuota` reports (MiB). */
  storageMb = 20_480;
  /** What the fake declares now; change it with `declare` and `omit`. */
  readonly capabilities: BackendCapabilities = {};
  readonly instances = new Map<string, FakeInstance>();
  readonly calls: { op: Operation; id?: string }[] = [];
  images = new Set<string>([DEFAULT_IMAGE]);
  /** Images made by snapshot/archive: the files they hold. */
  readonly savedImages = new Map<string, { kind: SavedImageKind; files: Map<string, Buffer> }>();
  onExec: (request: ExecRequest, spec: SandboxSpec) => FakeExecScript = (request) => ({
    chunks: [{ stream: 'stdout', text: `${request.command.join(' ')}\n` }],
  });
  /** Egress modes a declared `egress` accepts. */
  readonly modes: readonly EgressMode[] = ['open', 'proxy', 'none'];
  /** What the services told the declared `egress`: the exposed port and the last rules. */
  readonly egressState: { exposedPort?: number; rules: InstanceRules[] } = { rules: [] };
  private readonly failures = new Map<Operation, Error>();
  private readonly workers = new FakeWorkers();
  /** Watches of the instances' files (`active` counts those under way). */
  readonly watches = new FakeWatches();
  /** Named volumes (`mountsOnClaim` settable). */
  readonly fakeVolumes = new FakeVolumes();
  private nextId = 1;
  private nextProcess = 1;

  constructor(options: { capabilities?: readonly FakeCapability[] } = {}) {
    this.declare(...(options.capabilities ?? DEFAULT_CAPABILITIES));
  }

  /** Declares capabilities: services may use them from now on. */
  declare(...names: FakeCapability[]): void {
    for (const name of names) Object.assign(this.capabilities, { [name]: this });
  }

  /** Omits capabilities: services answer UNSUPPORTED for them from now on. */
  omit(...names: CapabilityName[]): void {
    for (const name of names) delete this.capabilities[name];
  }

  runtimes(): string[] {
    return ['fake'];
  }

  /** Makes the next call of `op` throw `error`. */
  failNext(op: Operation, error: Error): void {
    this.failures.set(op, error);
  }

  async ping(): Promise<void> {}

  async ensureImage(image: string): Promise<void> {
    if (!this.images.has(image)) {
      throw new ServiceError('IMAGE_UNAVAILABLE', `image '${image}' is not available`);
    }
  }

  async create(spec: SandboxSpec): Promise<InstanceState> {
    this.record('create');
    await this.ensureImage(spec.image);
    if (spec.network && spec.network.egress !== 'open' && !this.capabilities.egress) throw new UnsupportedError(this.name, `network.egress '${spec.network.egress}'`);
    const id = `fake-${this.nextId++}`;
    const networked = spec.network?.egress !== 'none';
    const state: InstanceState = {
      id,
      name: spec.name,
      uuid: spec.uuid,
      role: spec.role ?? 'sandbox',
      ...(spec.replica !== undefined ? { replica: spec.replica } : {}),
      status: 'running',
      ...(networked ? { ip: `10.0.0.${this.nextId}` } : {}),
      runtime: 'fake',
      created_at: new Date().toISOString(),
    };
    this.instances.set(id, { state, ip: state.ip ?? '', spec, files: new Map(this.savedImages.get(spec.image)?.files), detached: [], workers: new Map() });
    return { ...state };
  }

  async claim(id: string, spec: SandboxSpec): Promise<void> {
    const instance = this.require('claim', id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    if (instance.state.role !== 'pool' || instance.spec.uuid !== spec.uuid) throw badRequest(`container ${id} is not a pool instance for ${spec.uuid}`);
    // As Docker: a disk bound is set at create only.
    if (spec.disk_mb !== instance.spec.disk_mb) throw new UnsupportedError(this.name, 'changing the disk_mb of a pool instance');
    instance.state.name = spec.name;
    instance.spec = { ...instance.spec, name: spec.name, vcpus: spec.vcpus, memory_mb: spec.memory_mb };
  }

  /** Empties a reusable instance's files and detached commands; CONFLICT for any other. */
  async reset(id: string): Promise<void> {
    const instance = this.require('reset', id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    if (!instance.spec.reusable) throw conflict(`container ${id} is not reusable`);
    instance.files = new Map(this.savedImages.get(instance.spec.image)?.files);
    instance.detached = [];
    this.workers.stopAll(instance.workers);
  }

  async start(id: string): Promise<InstanceState> {
    const instance = this.require('start', id);
    if (instance.state.status !== 'running') instance.detached = [];
    this.workers.stopAll(instance.workers);
    instance.state.status = 'running';
    instance.state.ip = instance.ip || undefined;
    return { ...instance.state };
  }

  async stop(id: string): Promise<void> {
    const { state, workers } = this.require('stop', id);
    this.workers.stopAll(workers);
    state.status = 'stopped';
    state.ip = undefined;
  }

  async remove(id: string): Promise<void> {
    this.record('remove', id);
    const instance = this.instances.get(id);
    if (instance) this.workers.stopAll(instance.workers);
    this.instances.delete(id);
  }

  async inspect(id: string): Promise<InstanceState | null> {
    this.record('inspect', id);
    const instance = this.instances.get(id);
    return instance ? { ...instance.state } : null;
  }

  async list(): Promise<InstanceState[]> {
    this.record('list');
    return [...this.instances.values()].map((i) => ({ ...i.state }));
  }

  async exec(id: string, request: ExecRequest, options: ExecOptions = {}): Promise<ExecResult> {
    if (request.command.length === 0) throw badRequest('command: must be a non-empty array of strings');
    const instance = this.require('exec', id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    const started = Date.now();
    const script = this.onExec(request, instance.spec);
    const collector = new OutputCollector(request.max_output_bytes, options.onOutput);
    for (const chunk of script.chunks ?? []) collector.push({ stream: chunk.stream, data: Buffer.from(chunk.text) });
    let timedOut = false;
    // A signal aborted before the command got here kills it at once, as a dropped request would.
    if (script.hang && !options.signal?.aborted) {
      timedOut = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), request.timeout_ms);
        options.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve(false);
        });
      });
    }
    const { stdout, stderr, output, truncated } = collector.result();
    return {
      exit_code: timedOut ? 124 : script.hang || script.oom ? 137 : (script.exit_code ?? 0),
      stdout,
      stderr,
      output,
      truncated,
      timed_out: timedOut,
      ...(script.oom && !timedOut ? { oom_killed: true } : {}),
      duration_ms: Date.now() - started,
    };
  }

  async readFile(id: string, path: string): Promise<Buffer> {
    const instance = this.require('exec', id);
    const content = instance.files.get(path);
    if (content) return content;
    if ([...instance.files.keys()].some((p) => p.startsWith(`${path}/`))) throw badRequest(`'${path}' is a directory`);
    throw notFound(`file '${path}' not found`);
  }

  async readFileStream(id: string, path: string): Promise<Readable> {
    return Readable.from([await this.readFile(id, path)]);
  }

  async writeFile(id: string, path: string, content: Buffer): Promise<void> {
    const instance = this.require('exec', id);
    if (instance.files.has(posix.dirname(path))) throw badRequest(`'${posix.dirname(path)}' is not a directory`);
    this.watches.emit(id, instance.files.has(path) ? 'modified' : 'created', path);
    instance.files.set(path, Buffer.from(content));
  }

  async deleteFile(id: string, path: string): Promise<void> {
    const instance = this.require('exec', id);
    const doomed = [...instance.files.keys()].filter((p) => p === path || p.startsWith(`${path}/`));
    if (doomed.length === 0) throw notFound(`file '${path}' not found`);
    for (const p of doomed) instance.files.delete(p);
    for (const p of doomed) this.watches.emit(id, 'deleted', p);
  }

  async listDirectory(id: string, path: string): Promise<FsListing> {
    this.requireSupport('fileViews');
    return fakeListing(this.running('exec', id).files, path);
  }

  async stat(id: string, path: string): Promise<FsEntry> {
    this.requireSupport('fileViews');
    return fakeStat(this.running('exec', id).files, path);
  }

  async packDirectory(id: string, path: string): Promise<Readable> {
    this.requireSupport('fileArchives');
    return Readable.from([await fakePack(this.running('exec', id).files, path)]);
  }

  async unpackInto(id: string, path: string, archive: Buffer): Promise<UnpackSummary> {
    this.requireSupport('fileArchives');
    const unpacked = await fakeUnpack(path, archive);
    for (const [file, content] of unpacked) await this.writeFile(id, file, content);
    return { path, entries: unpacked.size, bytes: [...unpacked.values()].reduce((sum, content) => sum + content.length, 0) };
  }

  async watch(id: string, path: string, options: { recursive: boolean; signal: AbortSignal }): Promise<AsyncIterable<FsWatchEvent>> {
    await this.stat(id, path);
    return this.watches.watch(id, path, options.signal);
  }

  get mountsOnClaim(): boolean {
    return this.fakeVolumes.mountsOnClaim;
  }

  async createVolume(name: string): Promise<VolumeInfo> {
    this.requireSupport('volumes');
    if (this.fakeVolumes.volumes.has(name)) throw conflict(`volume '${name}' already exists`);
    return this.fakeVolumes.create(name);
  }

  async listVolumes(): Promise<VolumeInfo[]> {
    this.requireSupport('volumes');
    return [...this.fakeVolumes.volumes.values()];
  }

  async inspectVolume(name: string): Promise<VolumeInfo | null> {
    this.requireSupport('volumes');
    return this.fakeVolumes.volumes.get(name) ?? null;
  }

  async removeVolume(name: string): Promise<void> {
    if (!(await this.inspectVolume(name))) throw notFound(`volume '${name}' not found`);
    if ([...this.instances.values()].some((instance) => instance.spec.volumes?.some((mount) => mount.name === name))) throw conflict(`volume '${name}' is in use by a container`);
    this.fakeVolumes.volumes.delete(name);
  }

  /** Runs the `onExec` script at once; a `hang` script runs until it is killed. */
  async startDetached(id: string, request: DetachedRequest): Promise<DetachedProcess> {
    this.requireSupport('detached');
    const instance = this.running('startDetached', id);
    const script = this.onExec({ ...request, timeout_ms: 0 }, instance.spec);
    const output = { stdout: '', stderr: '' };
    for (const chunk of script.chunks ?? []) output[chunk.stream] += chunk.text;
    const exitCode = script.hang ? null : (script.exit_code ?? 0);
    const process: DetachedProcess = {
      id: String(this.nextProcess++),
      pid: 1000 + this.nextProcess,
      command: request.command,
      status: exitCode === null ? 'running' : exitCode === 0 ? 'completed' : 'failed',
      exit_code: exitCode,
      started_at: new Date().toISOString(),
      ...(exitCode === null ? {} : { finished_at: new Date().toISOString() }),
    };
    instance.detached.push({ process, output });
    return { ...process };
  }

  async listDetached(id: string): Promise<DetachedProcess[]> {
    this.requireSupport('detached');
    return this.running('listDetached', id).detached.map((item) => ({ ...item.process }));
  }

  async detachedLogs(id: string, processId: string, stream: 'stdout' | 'stderr'): Promise<DetachedLog> {
    this.requireSupport('detached');
    return { content: Buffer.from(this.detachedOf(id, processId).output[stream]), start: 0 };
  }

  async killDetached(id: string, processId: string): Promise<void> {
    this.requireSupport('detached');
    const { process } = this.detachedOf(id, processId);
    if (process.status === 'running') Object.assign(process, { status: 'killed', exit_code: 137, finished_at: new Date().toISOString() });
  }

  /** Ends a running (`hang`) detached command as if it exited with `exitCode`, having printed `output`. */
  finishDetached(id: string, processId: string, exitCode: number, output: Partial<Record<'stdout' | 'stderr', string>> = {}): void {
    const item = this.detachedOf(id, processId);
    item.output.stdout += output.stdout ?? '';
    item.output.stderr += output.stderr ?? '';
    Object.assign(item.process, { status: exitCode === 0 ? 'completed' : 'failed', exit_code: exitCode, finished_at: new Date().toISOString() });
  }

  /** Starts a scripted worker unless one runs with the same request; see `scriptWorker`. */
  async ensureWorker(id: string, key: string, request: WorkerRequest): Promise<WorkerProcess> {
    this.requireSupport('workers');
    checkWorkerKey(key);
    checkWorkerRequest(request);
    return this.workers.ensure(this.running('ensureWorker', id).workers, id, key, request);
  }

  async callWorker(id: string, key: string, call: WorkerCall): Promise<WorkerReply> {
    this.requireSupport('workers');
    checkWorkerKey(key);
    checkWorkerCall(call);
    return this.workers.call(this.running('callWorker', id).workers, key, call);
  }

  async stopWorker(id: string, key: string): Promise<void> {
    this.requireSupport('workers');
    checkWorkerKey(key);
    this.workers.stop(this.running('stopWorker', id).workers, key);
  }

  async listWorkers(id: string): Promise<WorkerProcess[]> {
    this.requireSupport('workers');
    return this.workers.list(this.running('listWorkers', id).workers);
  }

  /**
   * How every worker answers from now on (default: the line itself, behind the nonce). The
   * handler returns the line the worker prints, or `{line, stderr}`, `{hang: true}` (the call
   * times out), `{exit_code}` (the worker exits); a line that does not begin with the nonce is
   * garbage. Each failure stops the worker, as on a real backend.
   */
  scriptWorker(handler: FakeWorkerHandler): void {
    this.workers.handler = handler;
  }

  /** Every worker started so far, in order (a reused worker is not started again). */
  get workerStarts(): readonly { id: string; key: string; request: WorkerRequest }[] {
    return this.workers.starts;
  }

  /** Ends worker `key` between calls, as a worker that died: its next call is NOT_FOUND. */
  endWorker(id: string, key: string): void {
    const instance = this.instances.get(id);
    if (instance) this.workers.stop(instance.workers, key);
  }

  async snapshot(id: string, tag: string, kind: SavedImageKind): Promise<void> {
    this.requireSupport('snapshots');
    const instance = this.require('snapshot', id);
    this.savedImages.set(tag, { kind, files: new Map(instance.files) });
    this.images.add(tag);
  }

  async archive(id: string, tag: string): Promise<void> {
    this.requireSupport('archive');
    const instance = this.require('archive', id);
    this.savedImages.set(tag, { kind: 'archive', files: new Map(instance.files) });
    this.images.add(tag);
    this.workers.stopAll(instance.workers);
    this.instances.delete(id);
  }

  async removeImage(tag: string): Promise<void> {
    this.record('removeImage');
    this.savedImages.delete(tag);
    this.images.delete(tag);
  }

  async listImages(): Promise<string[]> {
    return [...this.savedImages.keys()];
  }

  async resize(id: string, request: ResizeRequest): Promise<void> {
    this.requireSupport('resize');
    const instance = this.require('resize', id);
    if (request.vcpus !== undefined) instance.spec.vcpus = request.vcpus;
    if (request.memory_mb !== undefined) instance.spec.memory_mb = request.memory_mb;
  }

  /** The fake's instances are this process: they reach the host on its loopback. */
  async gatewayAddress(): Promise<string> {
    return '127.0.0.1';
  }

  async exposePort(port: number | undefined): Promise<void> {
    this.egressState.exposedPort = port;
  }

  async setRules(rules: InstanceRules[]): Promise<void> {
    this.egressState.rules = rules;
  }

  async ranges(): Promise<string[]> {
    return ['10.0.0.0/24'];
  }

  /** The fake's instances are this process: their ports are the host's loopback ports. */
  async connectPort(id: string, port: number): Promise<Duplex> {
    this.requireSupport('ports');
    this.running('connectPort', id);
    return connectTcp('127.0.0.1', port);
  }

  async close(): Promise<void> {}

  /** A capability the fake omits fails as it would on a backend without it, even when called directly. */
  private requireSupport(name: CapabilityName): void {
    if (!this.capabilities[name]) throw new UnsupportedError(this.name, name);
  }

  private running(op: Operation, id: string): FakeInstance {
    const instance = this.require(op, id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    return instance;
  }

  private detachedOf(id: string, processId: string): FakeDetached {
    const found = this.running('listDetached', id).detached.find((item) => item.process.id === processId);
    if (!found) throw notFound(`detached command '${processId}' not found`);
    return found;
  }

  private record(op: Operation, id?: string): void {
    this.calls.push({ op, ...(id ? { id } : {}) });
    const failure = this.failures.get(op);
    if (failure) {
      this.failures.delete(op);
      throw failure;
    }
  }

  private require(op: Operation, id: string): FakeInstance {
    this.record(op, id);
    const instance = this.instances.get(id);
    if (!instance) throw notFound(`container ${id} not found`);
    return instance;
  }
}
