import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, copyFile, lstat, link, mkdir, readFile, readdir, rename, rm, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../paths.js';
import { ServiceError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import { AgentUnreachable } from '../agent/agent-transport.js';

const execFileAsync = promisify(execFile);

/** Where the agent binary and its socket directory appear inside every sandbox. */
export const AGENT_IN_SANDBOX = { binary: '/.sandboxd/agent', dir: '/run/sandboxd', socket: '/run/sandboxd/agent.sock' } as const;

/** The agent binary that `npm run setup` builds. */
export function agentBinary(): string {
  const path = join(PACKAGE_ROOT, 'dist', 'agent', 'sandboxd-agent');
  if (!existsSync(path)) {
    throw new ServiceError('BACKEND_UNAVAILABLE', `the sandbox agent ${path} is missing: run npm run setup (it builds agent/ with Go)`);
  }
  return path;
}

/**
 * The host directory under which sandboxes' agent files live when none is given: paths a
 * sandbox sees in /proc/self/mountinfo (a bind mount shows its source), so they name nothing of
 * the checkout or the data directory. Root: /run/sandboxd; another user: its runtime directory
 * ($XDG_RUNTIME_DIR), else the data directory as the last resort.
 */
export function defaultRuntimeDir(dataDir: string): string {
  if (process.getuid?.() === 0) return '/run/sandboxd';
  const runtime = process.env.XDG_RUNTIME_DIR;
  return runtime ? join(runtime, 'sandboxd') : join(dataDir, 'run');
}

/** Host paths of what one container mounts from the host. */
export interface AgentMounts {
  binary: string;
  socketDir: string;
}

/** The host paths a container's Binds mount at the agent's places inside it. */
export function agentMountsOf(binds: string[] | undefined): Partial<AgentMounts> {
  const sourceOf = (target: string) => binds?.map((bind) => bind.split(':')).find((parts) => parts[1] === target)?.[0];
  return { binary: sourceOf(AGENT_IN_SANDBOX.binary), socketDir: sourceOf(AGENT_IN_SANDBOX.dir) };
}

export interface AgentSocketsOptions {
  /** The service's data directory: sandboxes made by earlier versions have their sockets there. */
  dataDir: string;
  /** Default: `defaultRuntimeDir(dataDir)`. */
  runtimeDir?: string;
  instanceId: string;
  logger: Logger;
}

/**
 * The host side of the agents: a copy of the agent binary named by its content
 * (`<runtime>/bin/agent-<sha256>`), and under `<runtime>/<instance>/` one directory per sandbox
 * (`<uuid>/`, bind-mounted at /run/sandboxd, where the agent creates agent.sock) with, beside
 * it, a hard link to that socket (`<uuid>.sock`) in a directory the sandbox cannot reach.
 *
 * Once the agent has made its socket the directory is sealed (immutable, `sandboxd-agent
 * set-immutable`): no command, root or not, can create, grow, replace or link anything there
 * (no profile grants CAP_LINUX_IMMUTABLE). It is unsealed only while the sandbox is stopped or
 * starting. (The engine's hosts, hostname and resolv.conf files are read-only inside: see
 * container-spec.ts.) Should sealing fail (a server without CAP_LINUX_IMMUTABLE), the host still never
 * connects to a path the sandbox can write: link(2) does not follow symlinks, the link must be
 * a socket (lstat), and only the link is connected to.
 */
export class AgentSockets {
  /** This instance's directory of socket directories and links. */
  readonly root: string;
  private readonly runtimeDir: string;
  /** Where sandboxes made by earlier versions keep theirs: `<dataDir>/agents`. */
  private readonly legacyRoot: string;
  private readonly logger: Logger;
  /** Sandboxes whose directory exists before their container does (a create under way). */
  private readonly creating = new Set<string>();
  private binaryCopy?: Promise<string>;

  constructor(options: AgentSocketsOptions) {
    this.runtimeDir = options.runtimeDir ?? defaultRuntimeDir(options.dataDir);
    this.root = join(this.runtimeDir, safeSegment(options.instanceId));
    this.legacyRoot = join(options.dataDir, 'agents');
    this.logger = options.logger;
  }

  /** The agent binary to mount: a copy under the runtime directory, made once per content. */
  binary(): Promise<string> {
    this.binaryCopy ??= this.copyBinary(agentBinary()).catch((err: unknown) => {
      this.binaryCopy = undefined;
      throw err;
    });
    return this.binaryCopy;
  }

  /**
   * Puts the agent binary back at a path a stopped container mounts, when it is gone (a runtime
   * directory on a tmpfs does not survive a reboot); the engine would mount an empty directory.
   */
  private async restoreBinary(path: string): Promise<void> {
    if (existsSync(path)) return;
    await mkdir(dirname(path), { recursive: true, mode: 0o711 });
    await copyAtomically(agentBinary(), path);
  }

  /**
   * The host directory to mount at /run/sandboxd, made empty: a container made again for the
   * same sandbox (one lost to `docker rm`) finds the old one sealed. `done` must be called once
   * the create ends.
   */
  async prepare(uuid: string): Promise<{ dir: string; done: () => void }> {
    this.creating.add(uuid);
    const dir = join(this.root, uuid);
    await this.unseal(dir);
    await rm(dir, { recursive: true, force: true });
    await rm(linkPathOf(dir), { force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return { dir, done: () => this.creating.delete(uuid) };
  }

  /**
   * Points the host-only link beside the socket directory at the socket the agent created now.
   * AgentUnreachable when there is no socket (an agent still starting) or when what the sandbox
   * left at that path is anything but a socket.
   */
  async relink(socketDir: string): Promise<string> {
    const target = linkPathOf(socketDir);
    await unlink(target).catch(ignoreMissing);
    try {
      await link(join(socketDir, 'agent.sock'), target);
    } catch (err) {
      throw new AgentUnreachable(`no agent socket in ${socketDir}: ${(err as Error).message}`);
    }
    const stat = await lstat(target);
    if (!stat.isSocket()) {
      await unlink(target).catch(ignoreMissing);
      throw new AgentUnreachable(`the agent socket in ${socketDir} is not a socket`);
    }
    return target;
  }

  /** Seals a socket directory whose agent has made its socket; a failure is logged, not thrown. */
  async seal(socketDir: string): Promise<void> {
    await this.setImmutable(socketDir, true).catch((err: unknown) => {
      this.logger.warn({ dir: socketDir, err }, 'could not seal the agent socket directory: the sandbox can write to it');
    });
  }

  /** Unseals a socket directory, so that a starting agent can make its socket anew. */
  async unseal(socketDir: string): Promise<void> {
    if (!existsSync(socketDir)) return;
    await this.setImmutable(socketDir, false).catch((err: unknown) => {
      this.logger.warn({ dir: socketDir, err }, 'could not unseal the agent socket directory');
    });
  }

  /**
   * Before a stopped container starts: its socket directory is unsealed for the agent's new
   * socket, and its agent binary put back if it is gone.
   */
  async beforeStart(binds: string[] | undefined): Promise<void> {
    const mounts = agentMountsOf(binds);
    if (mounts.socketDir) await this.unseal(mounts.socketDir);
    if (mounts.binary) await this.restoreBinary(mounts.binary);
  }

  /** Once the started container's agent answers: its socket directory is sealed again. */
  async afterStart(binds: string[] | undefined): Promise<void> {
    const socketDir = agentMountsOf(binds).socketDir;
    if (socketDir) await this.seal(socketDir);
  }

  /** Removes a sandbox's directory and link (wherever its container mounted them from). */
  async remove(uuid: string, socketDir = join(this.root, uuid)): Promise<void> {
    for (const dir of new Set([socketDir, join(this.root, uuid), join(this.legacyRoot, uuid)])) {
      await this.unseal(dir);
      await rm(dir, { recursive: true, force: true });
      await rm(linkPathOf(dir), { force: true });
    }
  }

  /** Removes the directories and links of every sandbox not in `live` (nor being created). */
  async removeOrphans(live: Set<string>): Promise<void> {
    for (const root of [this.root, this.legacyRoot]) {
      const entries = await readdir(root).catch(() => [] as string[]);
      const orphans = new Set(entries.map((entry) => entry.replace(/\.sock$/, '')).filter((uuid) => !live.has(uuid) && !this.creating.has(uuid)));
      for (const uuid of orphans) await this.remove(uuid, join(root, uuid));
    }
  }

  private async copyBinary(source: string): Promise<string> {
    const digest = createHash('sha256').update(await readFile(source)).digest('hex').slice(0, 16);
    const target = join(this.runtimeDir, 'bin', `agent-${digest}`);
    if (!existsSync(target)) {
      await mkdir(dirname(target), { recursive: true, mode: 0o711 });
      await copyAtomically(source, target);
    }
    return target;
  }

  /** `sandboxd-agent set-immutable`, run on the host: Node has no ioctl. */
  private async setImmutable(dir: string, on: boolean): Promise<void> {
    await execFileAsync(agentBinary(), ['set-immutable', on ? 'on' : 'off', dir], { timeout: 10_000 });
  }
}

/** The host-only link to the socket in a socket directory. */
export function linkPathOf(socketDir: string): string {
  return `${socketDir}.sock`;
}

/** Copies a file under a temporary name, then renames it: a reader never sees half of it. */
async function copyAtomically(source: string, target: string): Promise<void> {
  const partial = join(dirname(target), `.${basename(target)}.${process.pid}.partial`);
  await copyFile(source, partial);
  await chmod(partial, 0o755);
  await rename(partial, target);
}

/** An instance id as one path segment. */
function safeSegment(id: string): string {
  return /^[A-Za-z0-9_.-]{1,64}$/.test(id) && !id.startsWith('.') ? id : createHash('sha256').update(id).digest('hex').slice(0, 16);
}

const ignoreMissing = (err: unknown): void => {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
};
