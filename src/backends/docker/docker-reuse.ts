import type { ReuseCapability } from '../backend.js';
import { conflict } from '../../errors.js';
import { AgentUnreachable } from '../agent/agent-transport.js';
import type { AgentConnections } from './agent-connections.js';

/**
 * Reuse of a Docker sandbox made with `reusable: true` (read-only root, every writable path a
 * tmpfs or a bind its agent restores): the agent recorded its baseline when the sandbox was
 * made, and resets and checks it between runs (agent/reset.go). The engine takes no part: a
 * reset costs no container churn.
 */
export class DockerReuse implements ReuseCapability {
  constructor(private readonly agents: AgentConnections) {}

  async reset(id: string): Promise<void> {
    try {
      await this.agents.of(id).reset();
    } catch (err) {
      if (err instanceof AgentUnreachable) throw conflict(`container '${id}' is not running`);
      throw err;
    }
  }
}
