import type { InstanceState, TerminalCapability, TerminalRequest, TerminalSession } from '../backend.js';
import { agentOnly, type AgentConnections } from './agent-connections.js';

/**
 * Terminals of a Docker sandbox: its agent allocates the pseudo-terminal and starts the shell as
 * the sandbox's default user in its working directory (agent/pty.go), on a connection of its
 * own to the agent's socket; the same under gVisor, whose kernel has its own /dev/ptmx.
 */
export class DockerTerminals implements TerminalCapability {
  constructor(
    private readonly agents: AgentConnections,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
  ) {}

  openTerminal(id: string, request: TerminalRequest): Promise<TerminalSession> {
    return agentOnly(this.agents, {
      id,
      operation: (agent) => agent.openTerminal(request),
      inspect: this.inspect,
      what: 'terminals',
    });
  }
}
