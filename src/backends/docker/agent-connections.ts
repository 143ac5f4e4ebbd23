import type Docker from 'dockerode';
import type { Logger } from '../../telemetry/logger.js';
import { UnsupportedError, conflict, notFound } from '../../errors.js';
import type { DetachedProcess, InstanceState } from '../backend.js';
import { AgentClient, type AgentDetached, type AgentHealth } from '../agent/agent-client.js';
import { AgentUnreachable, UnixSocketTransport } from '../agent/agent-transport.js';
import { agentMountsOf, type AgentSockets } from './agent-sockets.js';
import { LABEL, RUNSC_KERNEL_HEADROOM_MB } from './container-spec.js';

/** How long a started sandbox's agent may take to answer before the engine's exec is used. */
const AGENT_READY_MS = 5_000;

/** The labels of a container that say which agent serves it, as whom commands run, and its limits. */
export interface ContainerIdentity {
  uuid: string;
  /** The image's default user; undefined means the container's own user. */
  user?: string;
  runtime?: string;
  vcpus: number;
  memoryMb: number;
  /** Its disk_mb; undefined where it was made without one. */
  diskMb?: number;
  /** Host paths of the agent binary and socket directory it mounts; none without an agent. */
  binary?: string;
  socketDir?: string;
}

/** A container's identity from its labels and host configuration (as created or inspected). */
export function identityOf(labels: Record<string, string>, host: Docker.HostConfig): ContainerIdentity {
  return {
    uuid: labels[LABEL.uuid] ?? '',
    user: labels[LABEL.user] || undefined,
    runtime: host.Runtime,
    vcpus: (host.NanoCpus ?? 0) / 1e9,
    // The host's limit of a gVisor sandbox also holds its kernel's headroom (hostMemoryBytes).
    memoryMb: (host.Memory ?? 0) / 1024 / 1024 - (host.Runtime === 'runsc' && host.Memory ? RUNSC_KERNEL_HEADROOM_MB : 0),
    ...(labels[LABEL.diskMb] ? { diskMb: Number(labels[LABEL.diskMb]) } : {}),
    ...agentMountsOf(host.Binds),
  };
}

/**
 * The Docker backend's agents: one kept-alive connection pool per container id, over a Unix
 * socket transport to the container's socket link (never a path the sandbox can write), and
 * each container's identity, asked of the engine once.
 */
export class AgentConnections {
  private readonly agents = new Map<string, AgentClient>();
  private readonly identities = new Map<string, ContainerIdentity>();

  constructor(
    private readonly docker: Docker,
    private readonly sockets: AgentSockets,
    private readonly logger: Logger,
  ) {}

  /** The agent of a container (connected on first use). */
  of(id: string): AgentClient {
    let agent = this.agents.get(id);
    if (!agent) {
      agent = new AgentClient(
        new UnixSocketTransport(async () => {
          const identity = await this.identityOf(id);
          if (!identity) throw new AgentUnreachable(`container '${id}' is no sandbox of this service`);
          if (!identity.socketDir) throw new AgentUnreachable(`container '${id}' has no agent`);
          return this.sockets.relink(identity.socketDir);
        }),
      );
      this.agents.set(id, agent);
    }
    return agent;
  }

  /** Closes a container's connections (it stopped or restarts); the next use connects again. */
  disconnect(id: string): void {
    this.agents.get(id)?.close();
    this.agents.delete(id);
  }

  disconnectAll(): void {
    for (const id of [...this.agents.keys()]) this.disconnect(id);
  }

  /** Forgets a removed container. */
  forget(id: string): void {
    this.disconnect(id);
    this.identities.delete(id);
  }

  remember(id: string, identity: ContainerIdentity): void {
    this.identities.set(id, identity);
  }

  /** The identity of a container of this service, from its labels; undefined for any other. */
  async identityOf(id: string): Promise<ContainerIdentity | undefined> {
    let identity = this.identities.get(id);
    if (!identity) {
      const info = await this.docker.getContainer(id).inspect().catch(() => undefined);
      const uuid = info?.Config.Labels?.[LABEL.uuid];
      if (!info || !uuid) return undefined;
      identity = identityOf(info.Config.Labels, info.HostConfig);
      this.identities.set(id, identity);
    }
    return identity;
  }

  /**
   * Waits until a just-started agent answers, with its health; past the deadline the engine's
   * exec stands in (undefined).
   */
  async waitForAgent(id: string): Promise<AgentHealth | undefined> {
    const deadline = Date.now() + AGENT_READY_MS;
    for (;;) {
      try {
        return await this.of(id).health();
      } catch (err) {
        if (!(err instanceof AgentUnreachable)) throw err;
        if (Date.now() > deadline) {
          this.logger.warn({ container: id, reason: err.message }, 'the sandbox agent did not start; using the engine exec');
          return undefined;
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  }
}

/** A detached command as the agent lists it, as the backend interface names it. */
export function detachedFrom(item: AgentDetached): DetachedProcess {
  return {
    id: item.id,
    pid: item.pid,
    command: item.argv,
    status: item.status,
    exit_code: item.exit_code,
    started_at: new Date(item.started_at).toISOString(),
    ...(item.finished_at ? { finished_at: new Date(item.finished_at).toISOString() } : {}),
  };
}

/**
 * An operation only the agent offers (the engine has no process table that outlives an exec).
 * Where no agent answers: NOT_FOUND for a missing container, CONFLICT for a stopped one, and
 * UNSUPPORTED (naming `what`) for one without the agent.
 */
export async function agentOnly<T>(
  agents: AgentConnections,
  target: { id: string; operation: (agent: AgentClient) => Promise<T>; inspect: (id: string) => Promise<InstanceState | null>; what: string },
): Promise<T> {
  const { id } = target;
  try {
    return await target.operation(agents.of(id));
  } catch (err) {
    if (!(err instanceof AgentUnreachable)) throw err;
    const state = await target.inspect(id);
    if (!state) throw notFound(`container '${id}' not found`);
    if (state.status !== 'running') throw conflict(`container '${id}' is not running: start the sandbox first`);
    throw new UnsupportedError('docker', `${target.what} in a sandbox without the sandbox agent (made by an older sandboxd)`);
  }
}
