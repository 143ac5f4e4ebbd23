import { lstat, link, mkdir, readdir, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../paths.js';
import { existsSync } from 'node:fs';
import { ServiceError } from '../../errors.js';
import { AgentUnreachable } from '../agent/agent-transport.js';

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
 * The host side of the agents' sockets, under `<data-dir>/agents/`: one directory per sandbox
 * (`<uuid>/`, bind-mounted at /run/sandboxd, where the agent creates agent.sock) and, beside it,
 * a hard link to that socket (`<uuid>.sock`) in a directory the sandbox cannot reach. The
 * sandbox can write into its own directory, e.g. replace agent.sock with a symlink to a host
 * socket, so the host never connects to a path in there: link(2) does not follow symlinks, the
 * link must be a socket (lstat), and only the link is connected to.
 */
export class AgentSockets {
  readonly root: string;
  /** Sandboxes whose directory exists before their container does (a create under way). */
  private readonly creating = new Set<string>();

  constructor(dataDir: string) {
    this.root = join(dataDir, 'agents');
  }

  /** The host directory to mount at /run/sandboxd; `done` must be called once the create ends. */
  async prepare(uuid: string): Promise<{ dir: string; done: () => void }> {
    this.creating.add(uuid);
    const dir = join(this.root, uuid);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return { dir, done: () => this.creating.delete(uuid) };
  }

  /** The host-only path to connect to for this sandbox (valid after `relink`). */
  linkPath(uuid: string): string {
    return join(this.root, `${uuid}.sock`);
  }

  /**
   * Points the host-only link at the socket the agent created now. AgentUnreachable when there
   * is no socket (an old sandbox without an agent, or an agent still starting) or when what the
   * sandbox left at that path is anything but a socket.
   */
  async relink(uuid: string): Promise<string> {
    const target = this.linkPath(uuid);
    await unlink(target).catch(ignoreMissing);
    try {
      await link(join(this.root, uuid, 'agent.sock'), target);
    } catch (err) {
      throw new AgentUnreachable(`no agent socket for sandbox ${uuid}: ${(err as Error).message}`);
    }
    const stat = await lstat(target);
    if (!stat.isSocket()) {
      await unlink(target).catch(ignoreMissing);
      throw new AgentUnreachable(`the agent socket of sandbox ${uuid} is not a socket`);
    }
    return target;
  }

  /** Removes a sandbox's directory and link. */
  async remove(uuid: string): Promise<void> {
    await rm(join(this.root, uuid), { recursive: true, force: true });
    await rm(this.linkPath(uuid), { force: true });
  }

  /** Removes the directories and links of every sandbox not in `live` (nor being created). */
  async removeOrphans(live: Set<string>): Promise<void> {
    const entries = await readdir(this.root).catch(() => [] as string[]);
    const orphans = new Set(entries.map((entry) => entry.replace(/\.sock$/, '')).filter((uuid) => !live.has(uuid) && !this.creating.has(uuid)));
    for (const uuid of orphans) await this.remove(uuid);
  }
}

const ignoreMissing = (err: unknown): void => {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
};
