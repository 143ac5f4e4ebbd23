import { posix } from 'node:path';
import { badRequest, conflict, notFound, ServiceError, UnsupportedError } from '../../errors.js';
import type {
  Backend,
  BackendCapabilities,
  ExecOptions,
  ExecRequest,
  ExecResult,
  InstanceState,
  ResizeRequest,
  SandboxSpec,
  SavedImageKind,
} from '../backend.js';
import { DEFAULT_IMAGE } from '../../images/catalog.js';
import { OutputCollector } from '../output-collector.js';

interface FakeInstance {
  state: InstanceState;
  spec: SandboxSpec;
  files: Map<string, Buffer>;
}

/** What a scripted exec prints and returns. */
export interface FakeExecScript {
  chunks?: { stream: 'stdout' | 'stderr'; text: string }[];
  exit_code?: number;
  /** Resolves only when aborted or timed out, like a command that never ends. */
  hang?: boolean;
}

type Operation = 'create' | 'claim' | 'start' | 'stop' | 'remove' | 'exec' | 'list' | 'inspect' | 'snapshot' | 'archive' | 'resize' | 'removeImage';

/**
 * An in-memory backend for unit tests of the service layer. It is scriptable: exec
 * answers come from `onExec`, and `failNext` makes the next call of an operation throw.
 * It is never evidence that a real feature works.
 */
export class FakeBackend implements Backend {
  readonly name = 'fake';
  readonly instances = new Map<string, FakeInstance>();
  readonly calls: { op: Operation; id?: string }[] = [];
  images = new Set<string>([DEFAULT_IMAGE]);
  /** Images made by snapshot/archive: the files they hold. */
  readonly savedImages = new Map<string, { kind: SavedImageKind; files: Map<string, Buffer> }>();
  /** When false, snapshot, archive and resize raise UNSUPPORTED, like a backend without them. */
  lifecycleSupported = true;
  onExec: (request: ExecRequest, spec: SandboxSpec) => FakeExecScript = (request) => ({
    chunks: [{ stream: 'stdout', text: `${request.command.join(' ')}\n` }],
  });
  private readonly failures = new Map<Operation, Error>();
  private nextId = 1;

  capabilities(): BackendCapabilities {
    const can = this.lifecycleSupported;
    return { snapshot: can, resize: can, archive: can, browser: false, runtimes: ['fake'] };
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
    const id = `fake-${this.nextId++}`;
    const state: InstanceState = {
      id,
      name: spec.name,
      uuid: spec.uuid,
      role: spec.role ?? 'sandbox',
      status: 'running',
      ip: `10.0.0.${this.nextId}`,
      runtime: 'fake',
      created_at: new Date().toISOString(),
    };
    this.instances.set(id, { state, spec, files: new Map(this.savedImages.get(spec.image)?.files) });
    return { ...state };
  }

  async claim(id: string, spec: SandboxSpec): Promise<void> {
    const instance = this.require('claim', id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    if (instance.state.role !== 'pool' || instance.spec.uuid !== spec.uuid) throw badRequest(`container ${id} is not a pool instance for ${spec.uuid}`);
    instance.state.name = spec.name;
    instance.spec = { ...instance.spec, name: spec.name, vcpus: spec.vcpus, memory_mb: spec.memory_mb };
  }

  async start(id: string): Promise<InstanceState> {
    const instance = this.require('start', id);
    instance.state.status = 'running';
    return { ...instance.state };
  }

  async stop(id: string): Promise<void> {
    this.require('stop', id).state.status = 'stopped';
  }

  async remove(id: string): Promise<void> {
    this.record('remove', id);
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
    const instance = this.require('exec', id);
    if (instance.state.status !== 'running') throw conflict(`container ${id} is not running`);
    const started = Date.now();
    const script = this.onExec(request, instance.spec);
    const collector = new OutputCollector(request.max_output_bytes, options.onOutput);
    for (const chunk of script.chunks ?? []) collector.push({ stream: chunk.stream, data: Buffer.from(chunk.text) });
    let timedOut = false;
    if (script.hang) {
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
      exit_code: timedOut ? 124 : script.hang ? 137 : (script.exit_code ?? 0),
      stdout,
      stderr,
      output,
      truncated,
      timed_out: timedOut,
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

  async writeFile(id: string, path: string, content: Buffer): Promise<void> {
    const instance = this.require('exec', id);
    if (instance.files.has(posix.dirname(path))) throw badRequest(`'${posix.dirname(path)}' is not a directory`);
    instance.files.set(path, Buffer.from(content));
  }

  async deleteFile(id: string, path: string): Promise<void> {
    const instance = this.require('exec', id);
    const doomed = [...instance.files.keys()].filter((p) => p === path || p.startsWith(`${path}/`));
    if (doomed.length === 0) throw notFound(`file '${path}' not found`);
    for (const p of doomed) instance.files.delete(p);
  }

  /** Detached commands need a real process table: only real backends have them. */
  async startDetached(): Promise<never> {
    throw new UnsupportedError(this.name, 'detached commands');
  }

  async listDetached(): Promise<never> {
    throw new UnsupportedError(this.name, 'detached commands');
  }

  async detachedLogs(): Promise<never> {
    throw new UnsupportedError(this.name, 'detached commands');
  }

  async killDetached(): Promise<never> {
    throw new UnsupportedError(this.name, 'detached commands');
  }

  async snapshot(id: string, tag: string, kind: SavedImageKind): Promise<void> {
    this.requireSupport('snapshot');
    const instance = this.require('snapshot', id);
    this.savedImages.set(tag, { kind, files: new Map(instance.files) });
    this.images.add(tag);
  }

  async archive(id: string, tag: string): Promise<void> {
    this.requireSupport('archive');
    const instance = this.require('archive', id);
    this.savedImages.set(tag, { kind: 'archive', files: new Map(instance.files) });
    this.images.add(tag);
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

  async close(): Promise<void> {}

  private requireSupport(operation: string): void {
    if (!this.lifecycleSupported) throw new UnsupportedError(this.name, operation);
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
