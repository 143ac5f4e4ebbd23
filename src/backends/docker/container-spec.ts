import type Docker from 'dockerode';
import type { InstanceRole, InstanceState, Profile, ResizeRequest, SandboxSpec } from '../backend.js';
import { DEPLOYMENT_LABEL } from '../../images/deployment-names.js';
import { AGENT_IN_SANDBOX } from './agent-sockets.js';
import { hostnameOf } from './docker-hostname.js';

/** Labels every container of this service carries; reconciliation finds its containers by them. */
export const LABEL = {
  managed: 'sandboxd.managed',
  /** The deployment id (see Store): every engine object of one server carries it. */
  instance: DEPLOYMENT_LABEL,
  name: 'sandboxd.name',
  uuid: 'sandboxd.uuid',
  role: 'sandboxd.role',
  /** The replica a pool instance is held by (absent on a sandbox). */
  replica: 'sandboxd.replica',
  profile: 'sandboxd.profile',
  /** Kept as a label so that `list()` needs no inspect per container. */
  runtime: 'sandboxd.runtime',
  /** The image's default user: the container itself runs its agent as root. */
  user: 'sandboxd.user',
  /** The sandbox's disk_mb, absent without one (a claim must not change it). */
  diskMb: 'sandboxd.disk_mb',
} as const;

/** Where a sandbox's work tree lives, in every profile. */
export const WORKSPACE = '/workspace';

interface ProfileSettings {
  /** 'bridge': one of sandboxd's own bridge networks (`networkModeOf`); 'none': no network. */
  network: 'bridge' | 'none';
  readonlyRootfs: boolean;
  capDrop: string[];
  /** Given back after capDrop: what the agent needs to run commands as the default user. */
  capAdd: string[];
  noNewPrivileges: boolean;
  /** Runs under the restrictive runtime (gVisor when available). */
  restrictiveRuntime: boolean;
  /** Under runsc, the agent keeps gVisor's CAP_SYS_ADMIN after its start (reusableSettings). */
  keepSysAdmin?: boolean;
}

/** The security profiles, exactly as docs/decisions.md, "Security profiles" lays them out. */
export const PROFILE_SETTINGS: Record<Profile, ProfileSettings> = {
  permissive: { network: 'bridge', readonlyRootfs: false, capDrop: [], capAdd: [], noNewPrivileges: false, restrictiveRuntime: false },
  moderate: {
    network: 'bridge',
    readonlyRootfs: false,
    capDrop: ['NET_RAW', 'MKNOD', 'AUDIT_WRITE'],
    capAdd: [],
    noNewPrivileges: true,
    restrictiveRuntime: false,
  },
  /**
   * The agent (PID 1, root) needs SETUID/SETGID to become the default user and KILL to kill that
   * user's processes on a timeout. Commands never keep them: a change of uid clears every
   * capability, and commands that stay root go through the agent's --drop-caps.
   */
  restrictive: {
    network: 'none',
    readonlyRootfs: true,
    capDrop: ['ALL'],
    capAdd: ['SETUID', 'SETGID', 'KILL'],
    noNewPrivileges: true,
    restrictiveRuntime: true,
  },
};

/**
 * Paths read-only inside every sandbox: the engine's default list (which setting it replaces)
 * and the hosts, hostname and resolv.conf files the engine mounts from the host's disk, which
 * a command as root could otherwise grow there.
 */
export const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger', '/etc/hosts', '/etc/hostname', '/etc/resolv.conf'];

/**
 * Host pids a gVisor sandbox may use per process it runs. Its kernel (runsc's sentry, on the
 * ptrace platform) needs about eight host threads for each process inside, and the host's pids
 * limit counts them: at the limit the sentry cannot make a thread and the whole sandbox dies
 * (~120 background processes did it under a limit of 512). So the host limit is this many
 * times the sandbox's pids limit, and the processes are bounded inside the sandbox instead
 * (the agent's `--max-procs`, RLIMIT_NPROC), where a fork past the bound fails as it does under runc.
 */
export const RUNSC_HOST_PIDS_PER_PROCESS = 16;

/**
 * The bound on a gVisor sandbox's processes: its pids limit, and no more than one per 2 MB of
 * its memory, because the sentry's memory per process counts against the sandbox's limit and
 * its reaching that limit kills the whole sandbox too (measured with 256 MB: 128 sleeping
 * processes left it running, 512 killed it).
 */
export function runscMaxProcesses(pidsLimit: number, memoryMb: number): number {
  return Math.max(16, Math.min(pidsLimit, Math.floor(memoryMb / 2)));
}

/**
 * The least free memory (MiB) the agent's memory guard keeps in a gVisor sandbox by killing its
 * largest command (agent/memory_guard.go keeps a quarter of the memory, at least this, at most
 * half). The host's memory limit also counts gVisor's own kernel, which grows with the processes
 * it ran and which gVisor's free memory does not show (measured with 256 MB: after 600
 * processes, a hog killed at 32 MiB free still took the sandbox down; at 64 MiB it did not).
 */
export const RUNSC_MEMORY_RESERVE_MB = 64;

/**
 * What a gVisor sandbox's host memory limit holds beyond its memory_mb: room for gVisor's own
 * kernel (the sentry), which the host's limit counts and gVisor's free memory does not show.
 * It grows with every process the sandbox ran and does not give the memory back (measured with
 * 256 MB: 18 MB at start, 84 MB after 128 processes, 110 MB anonymous plus 26 MB of files
 * when a hog after 600 processes took the sandbox down). The agent's guard is told it
 * (`--memory-headroom`) and keeps the sandbox's programs within memory_mb.
 */
export const RUNSC_KERNEL_HEADROOM_MB = 128;

/** The host's memory limit of a sandbox of `memoryMb` under `runtime`, in bytes. */
export function hostMemoryBytes(memoryMb: number, runtime: string | undefined): number {
  return (memoryMb + (runtime === 'runsc' ? RUNSC_KERNEL_HEADROOM_MB : 0)) * 1024 * 1024;
}

/** Numeric owner of the image's default user. */
export interface UserIds {
  uid: number;
  gid: number;
}

/**
 * Who commands run as without sudo in a sandbox whose image's default user is root (`USER root`,
 * or no USER, as debian:bookworm): nobody, uid and gid 65534. Only sudo runs a command as root.
 */
export const UNPRIVILEGED: UserIds = { uid: 65534, gid: 65534 };

/** Whether an image's Config.User names root without looking into the image ('', root, 0, with any group). */
export function isRootUser(user: string): boolean {
  const name = user.split(':')[0] ?? '';
  return name === '' || name === 'root' || /^0+$/.test(name);
}

export interface ContainerContext {
  instanceId: string;
  /** OCI runtime for this sandbox (already resolved for its profile). */
  runtime: string;
  pidsLimit: number;
  /** Owner of the tmpfs /workspace on a read-only root filesystem. */
  workspaceOwner: UserIds;
  /** Who commands run as without sudo (the image's Config.User, or nobody where that is root). */
  defaultUser: string;
  /** The default user replaced the image's root: the image's own /workspace is given to it. */
  claimWorkspace?: boolean;
  /** Host paths of the agent binary and of this sandbox's socket directory. */
  agent: { binary: string; socketDir: string };
  /** The image's HOME (its Env), which a reusable sandbox gets as a tmpfs. */
  home?: string;
  /** MiB of the image's own blocks that a bounded writable layer's limit counts (`imageAllowanceMb`; 0 where only writes count). */
  imageAllowanceMb?: number;
  /** The Docker network the container joins (`networkModeOf`), or `none`. */
  networkMode: string;
}

/**
 * The network a sandbox's container joins: none for a profile without a network (restrictive)
 * or egress `none`, else sandboxd's own network of its egress (`open` by default): never
 * Docker's default bridge, where containers reach each other.
 */
export function networkModeOf(spec: Pick<SandboxSpec, 'profile' | 'network'>, networks: { open: string; proxy: string }): string {
  if (PROFILE_SETTINGS[spec.profile].network === 'none') return 'none';
  const egress = spec.network?.egress ?? 'open';
  return egress === 'none' ? 'none' : networks[egress];
}

/** `sandboxd-<name>-<last 8 chars of uuid>`: readable in `docker ps`, unique per sandbox. */
export function containerName(spec: Pick<SandboxSpec, 'name' | 'uuid'>): string {
  return `sandboxd-${spec.name}-${spec.uuid.slice(-8)}`;
}

/**
 * `sandboxd-<instance>-vol-<name>`: the engine's name of a service's volume, apart from other
 * services' (each instance id its own) and from volumes this service did not make.
 */
export function dockerVolumeName(instanceId: string, name: string): string {
  return `sandboxd-${instanceId}-vol-${name}`;
}

/** Label filter that selects every container of one service instance. */
export function instanceFilter(instanceId: string): string[] {
  return [`${LABEL.managed}=true`, `${LABEL.instance}=${instanceId}`];
}

/**
 * The Engine API create body for a sandbox. The sandbox agent is PID 1 (the image's entrypoint
 * is overridden; the agent reaps, so no docker-init) and runs as root so that it can run
 * commands as the image's default user or as root. It needs nothing from the image: no shell,
 * no libc, no /etc/passwd (root is uid 0 without one), no /workspace (it makes it). The only host paths mounted are the agent
 * binary (read-only, a copy under the runtime directory) and the sandbox's own socket directory
 * (sealed once the agent listens: agent-sockets.ts); the environment is the spec's alone.
 */
export function createOptions(spec: SandboxSpec, ctx: ContainerContext): Docker.ContainerCreateOptions {
  const profile = reusableSettings(spec, ctx.runtime);
  const memoryBytes = hostMemoryBytes(spec.memory_mb, ctx.runtime);
  const tmpfsPaths = profile.readonlyRootfs ? writablePaths(ctx.workspaceOwner, spec.reusable ? { home: ctx.home } : undefined) : {};
  const budget = writableBudget(spec, profile.readonlyRootfs, Object.keys(tmpfsPaths).length, ctx.imageAllowanceMb ?? 0);
  const hostConfig: Docker.HostConfig = {
    Runtime: ctx.runtime,
    NetworkMode: ctx.networkMode,
    ReadonlyRootfs: profile.readonlyRootfs,
    CapDrop: profile.capDrop,
    CapAdd: profile.capAdd,
    Binds: [`${ctx.agent.binary}:${AGENT_IN_SANDBOX.binary}:ro`, `${ctx.agent.socketDir}:${AGENT_IN_SANDBOX.dir}`],
    SecurityOpt: profile.noNewPrivileges ? ['no-new-privileges'] : [],
    ReadonlyPaths: READONLY_PATHS,
    NanoCpus: Math.round(spec.vcpus * 1e9),
    Memory: memoryBytes,
    // Equal to Memory: no swap, so the memory limit is a hard one.
    MemorySwap: memoryBytes,
    PidsLimit: ctx.runtime === 'runsc' ? ctx.pidsLimit * RUNSC_HOST_PIDS_PER_PROCESS : ctx.pidsLimit,
  };
  if (profile.readonlyRootfs) {
    hostConfig.Tmpfs = Object.fromEntries(Object.entries(tmpfsPaths).map(([path, options]) => [path, `rw,exec,nosuid,nodev,size=${budget.tmpfsMb}m,${options}`]));
  }
  if (budget.shmMb !== undefined) hostConfig.ShmSize = budget.shmMb * 1024 * 1024;
  if (budget.layerMb !== undefined) hostConfig.StorageOpt = { size: `${budget.layerMb}m` };
  if (spec.volumes?.length) {
    hostConfig.Mounts = spec.volumes.map((mount) => ({ Type: 'volume', Source: dockerVolumeName(ctx.instanceId, mount.name), Target: mount.path, ReadOnly: mount.read_only === true }));
  }
  return {
    name: containerName(spec),
    Image: spec.image,
    Entrypoint: [
      AGENT_IN_SANDBOX.binary,
      'serve',
      '--socket',
      AGENT_IN_SANDBOX.socket,
      '--user',
      ctx.defaultUser || '0',
      // Made for the default user where the image lacks it, and the working directory of
      // images that name none, so that every sandbox has the /workspace the API promises.
      '--workspace',
      WORKSPACE,
      ...(ctx.claimWorkspace ? ['--claim-workspace'] : []),
      // Capabilities given to the agent alone must not reach root commands.
      ...(profile.capAdd.length > 0 ? ['--drop-caps'] : []),
      // Under gVisor the sandbox's processes are bounded inside it (see RUNSC_HOST_PIDS_PER_PROCESS).
      ...(ctx.runtime === 'runsc' ? ['--max-procs', String(runscMaxProcesses(ctx.pidsLimit, spec.memory_mb))] : []),
      // gVisor has no OOM killer of its own: the agent's guard fails the largest command instead.
      ...(ctx.runtime === 'runsc' ? ['--memory-guard', String(RUNSC_MEMORY_RESERVE_MB * 1024 * 1024), '--memory-headroom', String(RUNSC_KERNEL_HEADROOM_MB * 1024 * 1024)] : []),
      // gVisor shows every process's environ and maps to every user: the agent masks its own
      // (agent/proc_mask.go) with gVisor's CAP_SYS_ADMIN, which it then gives up unless a pool
      // claim or a reusable sandbox's resets need it (reusableSettings).
      ...(ctx.runtime === 'runsc' ? ['--mask-proc', ...(profile.keepSysAdmin ? [] : ['--drop-sys-admin'])] : []),
    ],
    Cmd: [],
    // The sandbox's name, not the container id (a claimed pool instance is renamed by its claim).
    Hostname: hostnameOf(spec.name),
    User: '0',
    Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
    Labels: {
      [LABEL.managed]: 'true',
      [LABEL.instance]: ctx.instanceId,
      [LABEL.name]: spec.name,
      [LABEL.uuid]: spec.uuid,
      [LABEL.role]: spec.role ?? 'sandbox',
      ...(spec.replica !== undefined ? { [LABEL.replica]: spec.replica } : {}),
      [LABEL.profile]: spec.profile,
      [LABEL.runtime]: ctx.runtime,
      [LABEL.user]: ctx.defaultUser,
      ...(spec.disk_mb !== undefined ? { [LABEL.diskMb]: String(spec.disk_mb) } : {}),
    },
    HostConfig: hostConfig,
  };
}

/** Docker's own size of a container's /dev/shm (MiB), kept where no disk_mb asks for less. */
const DEFAULT_SHM_MB = 64;

/** How a sandbox's memory and disk_mb bound each of its writable paths (MiB). */
/** The least limit a writable layer gets: the engine writes a few files of its own there (/etc/hostname's mount point, ...). */
const LAYER_FLOOR_MB = 8;

export interface WritableBudget {
  /** Each tmpfs mount of a read-only sandbox. */
  tmpfsMb: number;
  /** /dev/shm (a tmpfs in every sandbox); undefined: the engine's default. */
  shmMb?: number;
  /** The writable layer's limit (--storage-opt size), image blocks included where they count; undefined: none. */
  layerMb?: number;
}

/**
 * The bounds of a sandbox's writable paths. Each tmpfs is at most a quarter of the sandbox's
 * memory: tmpfs pages are charged to its memory limit, and a tmpfs as large as the limit let a
 * command that filled it take the whole sandbox (under gVisor the host kills the sandbox's
 * kernel, and with it every file); a full quarter is ENOSPC for the writer alone, with memory
 * left for the rest. With a disk_mb, everything writable together stays within it: a read-only
 * sandbox's tmpfs mounts and /dev/shm share it equally; a writable root gets what /dev/shm (at
 * most an eighth) leaves, on top of the image's own blocks where the engine's limit counts them
 * (`imageAllowanceMb`). A read-only root takes no write, but its layer is bounded all the same, to
 * LAYER_FLOOR_MB where only writes count.
 */
export function writableBudget(
  spec: Pick<SandboxSpec, 'memory_mb' | 'disk_mb'>,
  readOnly: boolean,
  tmpfsCount: number,
  imageAllowanceMb: number,
): WritableBudget {
  const quarter = Math.floor(spec.memory_mb / 4);
  const disk = spec.disk_mb;
  if (disk === undefined) return { tmpfsMb: quarter };
  const tmpfsMb = Math.max(1, Math.min(quarter, Math.floor(disk / (tmpfsCount + 1))));
  const shmMb = Math.max(1, Math.min(DEFAULT_SHM_MB, readOnly ? tmpfsMb : Math.floor(disk / 8)));
  const layerMb = Math.max(LAYER_FLOOR_MB, imageAllowanceMb + (readOnly ? 0 : disk - shmMb));
  return { tmpfsMb, shmMb, layerMb };
}

/**
 * The writable places of a read-only sandbox and their mount options but size (/tmp and
 * /workspace, and for a reusable one also /var/tmp and the image's HOME, hiding what the image
 * has there). They allow exec (agents run what they build); /workspace belongs to the default
 * user so that tools that check ownership (git's safe.directory) accept it.
 */
function writablePaths(owner: UserIds, reusable?: { home?: string }): Record<string, string> {
  const mounts: Record<string, string> = {
    '/tmp': 'mode=1777',
    [WORKSPACE]: `mode=0755,uid=${owner.uid},gid=${owner.gid}`,
  };
  if (!reusable) return mounts;
  // A reusable sandbox: every place programs expect to write is a tmpfs its reset restores.
  mounts['/var/tmp'] = 'mode=1777';
  const home = reusable.home;
  if (home?.startsWith('/') && home !== '/' && !Object.keys(mounts).some((path) => home === path || home.startsWith(`${path}/`))) {
    mounts[home] = `mode=0755,uid=${owner.uid},gid=${owner.gid}`;
  }
  return mounts;
}

/**
 * A gVisor warm-pool instance's agent also holds gVisor's CAP_SYS_ADMIN until its claim, to set
 * the sandbox's hostname (agent/hostname.go); what follows holds for it too.
 * A reusable sandbox (see ReuseCapability) keeps its profile but has a read-only root, so that
 * everything a run can change is in tmpfs mounts its agent restores. Under gVisor its agent
 * also holds CAP_SYS_ADMIN, to start each command in an IPC namespace of its own: gVisor does
 * not mount the mqueue filesystem, so a POSIX message queue left behind could not be found.
 * That capability is gVisor's (its kernel checks it, the host's never sees it), and commands
 * never hold it: a change of uid clears it, and root commands go through the agent's
 * --drop-caps, which clears every set under no-new-privileges.
 */
function reusableSettings(spec: SandboxSpec, runtime: string): ProfileSettings {
  const profile = PROFILE_SETTINGS[spec.profile];
  if (runtime !== 'runsc') return spec.reusable ? { ...profile, readonlyRootfs: true } : profile;
  // Every gVisor agent starts with gVisor's CAP_SYS_ADMIN, to mask its own /proc files
  // (agent/proc_mask.go); a pool instance's keeps it to set the hostname at its claim, then drops
  // it (agent/hostname.go); a reusable sandbox's keeps it for its resets.
  const capAdd = [...profile.capAdd, 'SYS_ADMIN'];
  if (spec.reusable) return { ...profile, readonlyRootfs: true, capAdd, keepSysAdmin: true };
  return { ...profile, capAdd, keepSysAdmin: spec.role === 'pool' };
}

/** The InstanceState of an inspected container. */
export function instanceFromInspect(info: Docker.ContainerInspectInfo): InstanceState {
  const labels = info.Config.Labels ?? {};
  return {
    ...instanceOf(info.Id, labels, info.State.Running, info.NetworkSettings.Networks, info.HostConfig.Runtime ?? labels[LABEL.runtime]),
    created_at: new Date(info.Created).toISOString(),
  };
}

/** The InstanceState of a `docker ps` row (no inspect needed: the runtime is a label). */
export function instanceFromSummary(row: Docker.ContainerInfo): InstanceState {
  const labels = row.Labels ?? {};
  return {
    ...instanceOf(row.Id, labels, row.State === 'running', row.NetworkSettings?.Networks, labels[LABEL.runtime]),
    created_at: new Date(row.Created * 1000).toISOString(),
  };
}

function instanceOf(
  id: string,
  labels: Record<string, string>,
  running: boolean,
  networks: Record<string, { IPAddress?: string }> | undefined,
  runtime: string | undefined,
): InstanceState {
  return {
    id,
    name: labels[LABEL.name] ?? '',
    uuid: labels[LABEL.uuid] ?? '',
    role: roleOf(labels),
    ...(labels[LABEL.replica] ? { replica: labels[LABEL.replica] } : {}),
    status: running ? 'running' : 'stopped',
    ip: running ? networkAddress(networks) : undefined,
    runtime,
  };
}

const roleOf = (labels: Record<string, string>): InstanceRole => {
  const role = labels[LABEL.role];
  return role === 'pool' || role === 'helper' ? role : 'sandbox';
};

/** The container's address on its network (a sandbox joins one: sandboxd's own, or the default bridge before it). */
function networkAddress(networks: Record<string, { IPAddress?: string }> | undefined): string | undefined {
  const address = Object.values(networks ?? {}).find((network) => network.IPAddress)?.IPAddress;
  return address ? address : undefined;
}

/** The engine's fields for new limits of a container under `runtime`; an absent one stays as it is. */
export function limitsOf(request: ResizeRequest, runtime: string | undefined): { NanoCpus?: number; Memory?: number; MemorySwap?: number } {
  const bytes = request.memory_mb === undefined ? undefined : hostMemoryBytes(request.memory_mb, runtime);
  const memory = bytes === undefined ? {} : { Memory: bytes, MemorySwap: bytes };
  return { ...(request.vcpus === undefined ? {} : { NanoCpus: Math.round(request.vcpus * 1e9) }), ...memory };
}
