import { Readable, type Duplex } from 'node:stream';
import Docker from 'dockerode';
import { ServiceError, UnsupportedError, badRequest, conflict, notFound } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type {
  ArchiveCapability,
  Backend,
  BackendCapabilities,
  BrowserRelayCapability,
  DetachedCapability,
  DetachedLog,
  DetachedProcess,
  DetachedRequest,
  ExecOptions,
  ExecRequest,
  ExecResult,
  InstanceState,
  PoolClaimCapability,
  PortsCapability,
  Profile,
  ResizeCapability,
  ResizeRequest,
  SandboxSpec,
  SavedImageKind,
  SnapshotCapability,
} from '../backend.js';
import { OutputCollector } from '../output-collector.js';
import {
  LABEL,
  networkModeOf,
  PROFILE_SETTINGS,
  containerName,
  createOptions,
  instanceFilter,
  instanceFromInspect,
  instanceFromSummary,
  isRootUser,
  limitsOf,
  UNPRIVILEGED,
} from './container-spec.js';
import { createDockerClient } from './docker-client.js';
import { createError, dockerMessage, dockerStatus, ignoreStatus, isNotFound, unreachableOr } from './docker-errors.js';
import { runExec } from './docker-exec.js';
import { hostnameOf, nameHost } from './docker-hostname.js';
import type { ExecOutcome, FrameExec } from '../exec-frames.js';
import * as files from './docker-files.js';
import { DockerImageBuilds } from './docker-image-builds.js';
import { DockerImages } from './docker-images.js';
import { DockerSnapshots } from './docker-snapshots.js';
import { validateSource } from '../source-validation.js';
import type { AgentClient } from '../agent/agent-client.js';
import { AgentUnreachable } from '../agent/agent-transport.js';
import { AgentConnections, agentOnly, detachedFrom, identityOf } from './agent-connections.js';
import { AGENT_IN_SANDBOX, AgentSockets, agentMountsOf } from './agent-sockets.js';
import { cloneSource, settleBoth, type ClonedSource, type CloneOptions } from './git-source.js';
import { copyIntoCreated, copyIntoRunning } from './docker-source-copy.js';
import { AllowedHosts } from '../source-destination.js';
import { startRelay } from './docker-relay.js';
import { connectPort } from './docker-ports.js';
import { DockerReuse } from './docker-reuse.js';
import { DockerWorkers } from './docker-workers.js';
import { DockerFileArchives, DockerFileViews } from './docker-fs-views.js';
import { ContainerListing } from './container-listing.js';
import { claimVolumeRoots, DockerVolumes } from './docker-volumes.js';
import { DockerTerminals } from './docker-terminals.js';
import { diskQuotaOf, imageAllowanceMb, type EngineStorageInfo } from './docker-storage.js';
import { DockerEgress } from './docker-egress.js';

export interface DockerBackendOptions {
  /** This service's id; every container gets the label sandboxd.instance=<instanceId>. */
  instanceId: string;
  /** The service's data directory. */
  dataDir: string;
  /**
   * Host directory of the agent binary and the sandboxes' socket directories, the only host
   * paths a sandbox mounts (see AgentSockets); default: `defaultRuntimeDir(dataDir)`.
   */
  runtimeDir?: string;
  logger: Logger;
  /** Default: DOCKER_HOST when it is a unix:// address, else /var/run/docker.sock. */
  socketPath?: string;
  /** Most processes one sandbox may hold; default 512. */
  pidsLimit?: number;
  /** Runtime of the restrictive profile; `auto` (the default) picks runsc when the engine lists it. */
  restrictiveRuntime?: 'auto' | 'runsc' | 'runc';
  /** An extra sentence for IMAGE_UNAVAILABLE, e.g. how to build the image locally. */
  imageHint?: (image: string) => string;
  /** Hosts, addresses and CIDR ranges a source_url may reach although they are not public. */
  sourceAllowedHosts?: readonly string[];
  /** `[network].name`: sandboxd's Docker networks and packet-filter chains are named from it (default `sandboxd`). */
  networkName?: string;
}

const DEFAULT_SOCKET = '/var/run/docker.sock';
const STOP_TIMEOUT_S = 5;

/**
 * Sandboxes as Docker containers. The sandbox agent is each container's PID 1; commands and
 * file operations go to it over its Unix socket (~2 ms), and through the Engine API's exec
 * (~45 ms) only where no agent answers (a container made before the agent existed). It offers
 * every capability; the class is each capability object itself, but for reuse, workers and terminals,
 * which live in docker-reuse.ts, docker-workers.ts and docker-terminals.ts.
 */
export class DockerBackend
  implements Backend, SnapshotCapability, ArchiveCapability, ResizeCapability, PoolClaimCapability, DetachedCapability, BrowserRelayCapability, PortsCapability
{
  readonly name = 'docker';
  readonly capabilities: BackendCapabilities = {
    snapshots: this,
    archive: this,
    resize: this,
    poolClaim: this,
    detached: this,
    browserRelay: this,
    gateway: this,
    ports: this,
  };
  /** sandboxd's own networks and packet filter (the `egress` capability). */
  readonly egress: DockerEgress;
  private readonly docker: Docker;
  private readonly socketPath: string;
  private readonly logger: Logger;
  private readonly images: DockerImages;
  private readonly snapshots: DockerSnapshots;
  /** Runtimes the engine offers; `runc` until `detectRuntimes` has asked the engine. */
  private engineRuntimes: string[] = ['runc'];
  /** The storage's quota limit counts a container's image blocks too (`EngineQuota.countsImage`). */
  private quotaCountsImage = true;
  private detecting?: Promise<string[]>;
  private readonly sockets: AgentSockets;
  private readonly agents: AgentConnections;
  private readonly cloneOptions: CloneOptions;
  private readonly volumes: DockerVolumes;
  /** Pool containers not yet claimed: what their create inspected, so that a claim needs no inspect. */
  private readonly waiting = new Map<string, Docker.ContainerInspectInfo>();
  private readonly listing: ContainerListing;

  constructor(private readonly options: DockerBackendOptions) {
    this.socketPath = options.socketPath ?? socketFromEnv() ?? DEFAULT_SOCKET;
    this.docker = createDockerClient(this.socketPath);
    this.listing = new ContainerListing(this.docker, () => this.docker.listContainers({ all: true, filters: { label: instanceFilter(options.instanceId) } }));
    this.logger = options.logger.child({ backend: 'docker' });
    this.images = new DockerImages(this.docker, options.instanceId, this.logger, options.imageHint);
    this.snapshots = new DockerSnapshots(this.docker, options.instanceId, this.logger);
    this.sockets = new AgentSockets({ dataDir: options.dataDir, runtimeDir: options.runtimeDir, instanceId: options.instanceId, logger: this.logger });
    this.agents = new AgentConnections(this.docker, this.sockets, this.logger);
    this.cloneOptions = { allowedHosts: new AllowedHosts(options.sourceAllowedHosts ?? []), logger: this.logger };
    this.capabilities.reuse = new DockerReuse(this.agents);
    this.capabilities.workers = new DockerWorkers(this.agents, (id) => this.inspect(id));
    this.capabilities.fileViews = new DockerFileViews(this.agents, (id) => this.inspect(id));
    this.capabilities.fileArchives = new DockerFileArchives(this.agents, (id) => this.inspect(id));
    this.volumes = new DockerVolumes(this.docker, options.instanceId);
    this.capabilities.volumes = this.volumes;
    this.capabilities.terminal = new DockerTerminals(this.agents, (id) => this.inspect(id));
    this.egress = new DockerEgress(this.docker, options.networkName ?? 'sandboxd', (id) => this.inspect(id), this.logger);
    this.capabilities.egress = this.egress;
    this.capabilities.imageBuild = new DockerImageBuilds(this.docker, this.logger);
  }

  /** Runtimes are known once `ping()` (or any create) has reached the engine. */
  runtimes(): string[] {
    return [...this.engineRuntimes];
  }

  async ping(): Promise<void> {
    await this.engine(async () => {
      await this.docker.ping();
      await this.detectEngine();
    });
  }

  async ensureImage(image: string): Promise<void> {
    await this.engine(() => this.images.ensure(image));
  }

  async create(spec: SandboxSpec): Promise<InstanceState> {
    if (spec.source) validateSource(spec.source);
    const [image, source] = await settleBoth(
      this.engine(() => this.images.ensure(spec.image)),
      spec.source ? cloneSource(spec.source, this.cloneOptions) : Promise.resolve(undefined),
      (cloned) => cloned?.dispose(),
    );
    try {
      return await this.engine(() => this.createRunning(spec, image, source));
    } finally {
      await source?.dispose();
    }
  }

  /**
   * A pool container becomes a sandbox: its agent must answer (~1 ms), then at once it takes the
   * sandbox's hostname and, for other limits, is updated in place (~20 ms; not under gVisor nor
   * where the tmpfs sizes follow them); it is renamed in the engine meanwhile. What its create
   * inspected holds while it waits.
   */
  async claim(id: string, spec: SandboxSpec): Promise<void> {
    const identity = await this.agents.identityOf(id);
    if (!identity || identity.uuid !== spec.uuid) throw badRequest(`container '${id}' is not the pool container of ${spec.uuid}`);
    // A disk bound is set at create (the writable layer's quota, the tmpfs sizes): no claim changes it.
    if (spec.disk_mb !== identity.diskMb) throw new UnsupportedError('docker', `changing the disk_mb of a pooled sandbox`);
    const limitsChange = spec.vcpus !== identity.vcpus || spec.memory_mb !== identity.memoryMb;
    if (limitsChange && (identity.runtime === 'runsc' || PROFILE_SETTINGS[spec.profile].readonlyRootfs)) {
      throw new UnsupportedError('docker', `changing the limits of a pooled ${spec.profile} sandbox`);
    }
    try {
      await this.agents.of(id).health();
    } catch (err) {
      if (err instanceof AgentUnreachable) throw conflict(`container '${id}' is not running`);
      throw err;
    }
    await this.engine(async () => {
      const container = this.docker.getContainer(id);
      const info = this.waiting.get(id) ?? (await container.inspect());
      this.waiting.delete(id);
      // Its name in the engine, for people reading `docker ps`, follows just after the answer:
      // the rename (7 ms here, more on a busy engine) was most of a claim.
      void container.rename({ name: containerName(spec) }).catch((err: unknown) => this.logger.debug({ container: id, err }, 'a claimed container kept its pool name'));
      await Promise.all([limitsChange ? container.update(limitsOf(spec, identity.runtime)) : undefined, this.nameHost(id, info, spec.name)]);
    }, id);
    this.agents.remember(id, { ...identity, vcpus: spec.vcpus, memoryMb: spec.memory_mb });
  }

  /** Starts a stopped container: its socket directory unsealed for the agent's new socket, sealed again once it answers (AgentSockets). */
  async start(id: string, spec?: Pick<SandboxSpec, 'name'>): Promise<InstanceState> {
    return this.engine(async () => {
      const container = this.docker.getContainer(id);
      const before = await container.inspect();
      if (!before.State.Running) await this.sockets.beforeStart(before.HostConfig.Binds);
      await this.egress.adopt(before);
      // 304: already running, which is what the caller wants.
      await container.start().catch(ignoreStatus(304));
      const info = await container.inspect();
      if (!before.State.Running) await this.egress.isolateDns(info);
      this.agents.disconnect(id);
      const agentUp = hasAgent(info) && (await this.agents.waitForAgent(id));
      if (agentUp) await this.sockets.afterStart(info.HostConfig.Binds);
      // The engine gives a started container the hostname it was made with: a claimed pool
      // instance's is its pool name.
      if (agentUp && spec && info.Config.Hostname !== hostnameOf(spec.name)) await this.nameHost(id, info, spec.name);
      return instanceFromInspect(info);
    }, id);
  }

  /** Makes the sandbox's name its hostname (docker-hostname.ts), logging what did not take. */
  private async nameHost(id: string, info: Docker.ContainerInspectInfo, name: string): Promise<void> {
    const named = await nameHost(info, name, (hostname) => this.agents.of(id).setHostname(hostname));
    if (!named.uts || !named.files) this.logger.debug({ container: id, ...named }, "a sandbox's hostname is not its name everywhere");
  }

  async stop(id: string): Promise<void> {
    this.agents.disconnect(id);
    await this.engine(() => this.docker.getContainer(id).stop({ t: STOP_TIMEOUT_S }).catch(ignoreStatus(304)), id);
  }

  async remove(id: string): Promise<void> {
    await this.engine(async () => {
      const container = this.docker.getContainer(id);
      const info = await container.inspect().catch(() => undefined);
      this.agents.forget(id);
      this.waiting.delete(id);
      // 404: already gone; 409: a removal is already under way.
      await container.remove({ force: true, v: true }).catch(ignoreStatus(404, 409));
      const uuid = info?.Config.Labels?.[LABEL.uuid];
      if (uuid) await this.sockets.remove(uuid, agentMountsOf(info?.HostConfig.Binds).socketDir);
      if (info) await this.snapshots.removeIfDangling(info.Image);
    });
  }

  async snapshot(id: string, tag: string, kind: SavedImageKind): Promise<void> {
    await this.engine(() => this.snapshots.commit(this.docker.getContainer(id), tag, kind, (request) => this.run(id, request)), id);
  }

  async archive(id: string, tag: string): Promise<void> {
    await this.snapshot(id, tag, 'archive');
    await this.remove(id);
  }

  async removeImage(tag: string): Promise<void> {
    await this.engine(() => this.snapshots.removeImage(tag));
  }

  async listImages(): Promise<string[]> {
    return this.engine(() => this.snapshots.list());
  }

  /**
   * Engine API container update: cgroup limits change at once in a running runc container.
   * gVisor cannot update a running sandbox (runsc has no `update`), so that is UNSUPPORTED.
   */
  async resize(id: string, request: ResizeRequest): Promise<void> {
    await this.engine(async () => {
      const container = this.docker.getContainer(id);
      const info = await container.inspect();
      if (info.State.Running && info.HostConfig.Runtime === 'runsc') {
        throw new UnsupportedError('docker', 'resizing a running gVisor (runsc) sandbox: stop it, resize, then start it');
      }
      await container.update(limitsOf(request, info.HostConfig.Runtime)).catch((err: unknown) => {
        if (dockerStatus(err) === 400 || dockerStatus(err) === 500) throw badRequest(`the engine refused the new limits: ${dockerMessage(err)}`);
        throw err;
      });
    }, id);
  }

  async inspect(id: string): Promise<InstanceState | null> {
    return this.engine(async () => {
      try {
        return instanceFromInspect(await this.docker.getContainer(id).inspect());
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  /** Also learns the engine's facts (runtimes, disk quota): recovery lists before any create. */
  async list(): Promise<InstanceState[]> {
    // Listed anew only after the engine recorded an event (ContainerListing).
    const rows = await this.engine(() => this.detectEngine().then(() => this.listing.list()));
    const instances = rows.map(instanceFromSummary);
    // Reconciliation starts here: socket directories of containers that no longer exist go.
    await this.sockets.removeOrphans(new Set(instances.map((instance) => instance.uuid)));
    return instances;
  }

  async exec(id: string, request: ExecRequest, options: ExecOptions = {}): Promise<ExecResult> {
    if (request.command.length === 0) throw badRequest('command: must be a non-empty array of strings');
    const started = Date.now();
    const collector = new OutputCollector(request.max_output_bytes, options.onOutput);
    const { max_output_bytes: _cap, ...command } = request;
    const outcome = await this.run(id, { ...command, signal: options.signal, onFrame: (stream, data) => collector.push({ stream, data }) });
    return {
      exit_code: outcome.exit_code,
      ...collector.result(),
      timed_out: outcome.timed_out,
      ...(outcome.oom_killed ? { oom_killed: true } : {}),
      duration_ms: Date.now() - started,
    };
  }

  readFile(id: string, path: string): Promise<Buffer> {
    return this.viaAgent(
      id,
      (agent) => agent.readFile(path, files.MAX_READ_BYTES, () => files.tooLarge(path)),
      () => files.readFile((request) => this.engineExec(id, request), path),
    );
  }

  /** Streamed from the agent; a sandbox without one is read whole through the engine (capped). */
  readFileStream(id: string, path: string): Promise<Readable> {
    return this.viaAgent(
      id,
      (agent) => agent.openFile(path),
      async () => Readable.from([await files.readFile((request) => this.engineExec(id, request), path)]),
    );
  }

  writeFile(id: string, path: string, content: Buffer): Promise<void> {
    return this.viaAgent(
      id,
      (agent) => agent.writeFile(path, content),
      () => files.writeFile((request) => this.engineExec(id, request), path, content),
    );
  }

  deleteFile(id: string, path: string): Promise<void> {
    return this.viaAgent(
      id,
      (agent) => agent.deleteFile(path),
      () => files.deleteFile((request) => this.engineExec(id, request), path),
    );
  }

  async startDetached(id: string, request: DetachedRequest): Promise<DetachedProcess> {
    const started = await this.agentOnly(id, (agent) => agent.startDetached(request));
    return detachedFrom(started);
  }

  async listDetached(id: string): Promise<DetachedProcess[]> {
    return (await this.agentOnly(id, (agent) => agent.listDetached())).map(detachedFrom);
  }

  detachedLogs(id: string, processId: string, stream: 'stdout' | 'stderr'): Promise<DetachedLog> {
    return this.agentOnly(id, (agent) => agent.detachedLogs(processId, stream));
  }

  killDetached(id: string, processId: string): Promise<void> {
    return this.agentOnly(id, (agent) => agent.killDetached(processId));
  }

  /**
   * Relays a loopback port of the sandbox onto its bridge address, for the host only (see
   * docker-relay.ts); a sandbox without a network (restrictive) has no address to relay to.
   */
  async relay(id: string, port: number): Promise<string> {
    return startRelay(id, await this.inspect(id), port, (request) => this.exec(id, request));
  }

  /** A connection to a port inside the sandbox, through its agent (docker-ports.ts). */
  connectPort(id: string, port: number): Promise<Duplex> {
    return connectPort(this.agents.of(id), id, port, (instance) => this.inspect(instance));
  }

  /** The host's address on sandboxd's network of this egress, where its sandboxes reach it. */
  gatewayAddress(egress: 'open' | 'proxy' = 'open'): Promise<string> {
    return this.engine(() => this.egress.gatewayAddress(egress));
  }

  /** Closes the agents' kept-alive connections and the engine event stream of the egress rules; other Engine API calls keep none. */
  async close(): Promise<void> {
    this.agents.disconnectAll();
    this.egress.close();
  }

  /** One command in a container: through its agent, else through the engine. */
  private run(id: string, request: FrameExec): Promise<ExecOutcome> {
    return this.viaAgent(
      id,
      (agent) => agent.exec(request),
      () => this.engineExec(id, request),
    );
  }

  /**
   * One Engine API exec, with the engine's refusals turned into service errors. The container
   * runs as root (for its agent), so the default user is named explicitly. Root goes as uid 0:
   * the engine looks a name up in the image's /etc/passwd, which a minimal image may not have.
   */
  private engineExec(id: string, request: FrameExec): Promise<ExecOutcome> {
    return this.engine(async () => {
      const named = request.user ?? (await this.agents.identityOf(id))?.user;
      const user = named === 'root' ? '0' : named;
      return runExec(this.docker.getContainer(id), { ...request, user }, this.logger);
    }, id);
  }

  /**
   * Does an operation through the container's agent; where the agent cannot be reached (the
   * request was never delivered, so nothing ran), through the engine instead.
   */
  private async viaAgent<T>(id: string, withAgent: (agent: AgentClient) => Promise<T>, withEngine: () => Promise<T>): Promise<T> {
    try {
      return await withAgent(this.agents.of(id));
    } catch (err) {
      if (!(err instanceof AgentUnreachable)) throw err;
      this.logger.debug({ container: id, reason: err.message }, 'agent unreachable; using the engine');
      return withEngine();
    }
  }

  /** An operation only the agent offers; see `agentOnly`. */
  private agentOnly<T>(id: string, operation: (agent: AgentClient) => Promise<T>): Promise<T> {
    return agentOnly(this.agents, { id, operation, inspect: (instance) => this.inspect(instance), what: 'detached commands' });
  }

  /**
   * Runs an Engine API call and maps its failures: an unreachable engine, and, when `id` names
   * the container the call is about, 404 (gone) and 409 (not running).
   */
  private async engine<T>(call: () => Promise<T>, id?: string): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      if (id !== undefined && dockerStatus(err) === 404) throw notFound(`container '${id}' not found`);
      if (id !== undefined && dockerStatus(err) === 409) {
        throw conflict(`container '${id}' is not running: start the sandbox first`);
      }
      throw unreachableOr(err, this.socketPath);
    }
  }

  /** The engine's runtimes and whether its storage bounds a container's writes (`diskQuota`), asked once. */
  private detectEngine(): Promise<string[]> {
    this.detecting ??= this.docker.info().then(
      async (info: EngineStorageInfo & { Runtimes?: Record<string, unknown> }) => {
        // Containerd's shim names are not runtimes a sandbox can ask for.
        this.engineRuntimes = Object.keys(info.Runtimes ?? { runc: {} }).filter((name) => !name.startsWith('io.containerd.'));
        const quota = await diskQuotaOf(info);
        this.quotaCountsImage = quota?.countsImage ?? true;
        if (quota) this.capabilities.diskQuota = quota.capability;
        else delete this.capabilities.diskQuota;
        return this.engineRuntimes;
      },
      (err: unknown) => {
        this.detecting = undefined;
        throw err;
      },
    );
    return this.detecting;
  }

  /** The names of sandboxd's networks, made (and filtered) first; none needed for a sandbox without a network. */
  private async networkNames(spec: SandboxSpec): Promise<{ open: string; proxy: string }> {
    if (networkModeOf(spec, { open: 'open', proxy: 'proxy' }) === 'none') return { open: 'none', proxy: 'none' };
    const networks = await this.egress.networks();
    return { open: networks.open.name, proxy: networks.proxy.name };
  }

  private async runtimeFor(profile: Profile): Promise<string> {
    if (!PROFILE_SETTINGS[profile].restrictiveRuntime) return 'runc';
    const wanted = this.options.restrictiveRuntime ?? 'auto';
    if (wanted === 'runc') return 'runc';
    const available = (await this.detectEngine()).includes('runsc');
    if (available) return 'runsc';
    if (wanted === 'runsc') {
      throw new ServiceError(
        'BACKEND_UNAVAILABLE',
        'the runsc (gVisor) runtime is not registered with Docker: install gVisor and add runsc to /etc/docker/daemon.json',
      );
    }
    return 'runc';
  }

  /** Creates the container, copies the source in, starts it; removes it again if any step fails. */
  private async createRunning(
    spec: SandboxSpec,
    image: Docker.ImageInspectInfo,
    source: ClonedSource | undefined,
  ): Promise<InstanceState> {
    const runtime = await this.runtimeFor(spec.profile);
    await this.detectEngine();
    if (spec.disk_mb !== undefined && !this.capabilities.diskQuota) throw new UnsupportedError('docker', "disk_mb: its storage cannot bound what a sandbox writes (README, 'Disk quota')");
    const readOnly = PROFILE_SETTINGS[spec.profile].readonlyRootfs || spec.reusable === true;
    // The default user's ids (a named user costs one probe of the image, then they are cached).
    const imageUser = await this.images.defaultUser(image);
    // Commands run as root only with sudo: an image whose default user is root runs them as nobody.
    const rootDefault = isRootUser(image.Config.User ?? '') || imageUser.uid === 0;
    const owner = rootDefault ? UNPRIVILEGED : imageUser;
    const binary = await this.sockets.binary();
    if (spec.network && !this.egress.modes.includes(spec.network.egress)) throw new UnsupportedError('docker', `network.egress '${spec.network.egress}'`);
    const networkMode = networkModeOf(spec, await this.networkNames(spec));
    const socketDir = await this.sockets.prepare(spec.uuid);
    const options = createOptions(spec, {
      networkMode,
      instanceId: this.options.instanceId,
      runtime,
      pidsLimit: this.options.pidsLimit ?? 512,
      workspaceOwner: owner,
      defaultUser: rootDefault ? `${UNPRIVILEGED.uid}:${UNPRIVILEGED.gid}` : (image.Config.User ?? ''),
      claimWorkspace: rootDefault,
      agent: { binary, socketDir: socketDir.dir },
      home: image.Config.Env?.find((entry) => entry.startsWith('HOME='))?.slice('HOME='.length),
      imageAllowanceMb: this.quotaCountsImage ? imageAllowanceMb(image.Size) : 0,
    });
    let container: Docker.Container | undefined;
    try {
      container = await this.docker.createContainer(options).catch((err: unknown) => {
        throw createError(err, spec.image, options.name ?? spec.name, this.options.imageHint);
      });
      this.agents.remember(container.id, identityOf(options.Labels ?? {}, options.HostConfig ?? {}));
      if (source && !readOnly) await copyIntoCreated(container, source, owner);
      // New volumes' roots go to the sandbox's user on the host (every profile); the rest, inside.
      const unowned = spec.volumes ? await this.volumes.ownRoots(spec.volumes, owner) : [];
      await container.start();
      const started = await container.inspect();
      // No command runs before create returns: the DNS rules overlap the agent's start.
      const [, health] = await Promise.all([this.egress.isolateDns(started), this.agents.waitForAgent(container.id)]);
      if (health?.default_user_error) {
        // As `docker run` refuses it; the agent would fail every command as that user.
        const user = image.Config.User;
        throw badRequest(`image '${spec.image}' cannot run sandboxes: its default user '${user}' does not resolve (${health.default_user_error})`);
      }
      // Before any command runs: from now on no command can write to a host path.
      if (health) await this.sockets.seal(socketDir.dir);
      if (unowned.length > 0) {
        const failed = await claimVolumeRoots(this.run.bind(this, container.id), unowned, owner);
        if (failed) this.logger.warn({ container: container.id, reason: failed }, "a volume's root stays root's: the sandbox's user may not write to it");
      }
      if (source && readOnly) await copyIntoRunning(container, source, owner, this.logger);
      if (readOnly) await this.snapshots.restoreWorkspace(image, this.run.bind(this, container.id));
      if (spec.reusable) await this.agents.of(container.id).baseline({ ipcNamespacePerCommand: runtime === 'runsc' });
      const state = instanceFromInspect(health ? started : await container.inspect()); // an agent that answers proves it runs
      if (spec.role === 'pool' && !spec.reusable && health) this.waiting.set(state.id, started);
      this.logger.debug({ container: state.id, name: spec.name, profile: spec.profile, runtime }, 'sandbox created');
      return state;
    } catch (err) {
      if (container) {
        this.agents.forget(container.id);
        const failed = container.id;
        await container.remove({ force: true, v: true }).catch((removeErr: unknown) => this.logger.error({ err: removeErr, container: failed }, 'could not remove a failed sandbox'));
      }
      await this.sockets.remove(spec.uuid);
      throw err;
    } finally {
      socketDir.done();
    }
  }
}

/** Whether a container runs the sandbox agent (containers made before it did not). */
function hasAgent(info: Docker.ContainerInspectInfo): boolean {
  return (info.Mounts ?? []).some((mount) => mount.Destination === AGENT_IN_SANDBOX.dir);
}

/** The socket of a `unix://` DOCKER_HOST; other schemes are not supported by this backend. */
function socketFromEnv(): string | undefined {
  const host = process.env.DOCKER_HOST;
  return host?.startsWith('unix://') ? host.slice('unix://'.length) : undefined;
}
