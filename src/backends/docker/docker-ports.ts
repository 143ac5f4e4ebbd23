import type { Duplex } from 'node:stream';
import { conflict, notFound, UnsupportedError } from '../../errors.js';
import type { InstanceState } from '../backend.js';
import type { AgentClient } from '../agent/agent-client.js';
import { AgentUnreachable } from '../agent/agent-transport.js';
import { connectTcp } from '../tcp-connect.js';

/**
 * A connection to a port inside a sandbox: through its agent, which dials the sandbox's own
 * loopback (servers bound to 127.0.0.1 only, sandboxes without a network); for a sandbox
 * without the agent (made by an older sandboxd), to its network address from `inspect`,
 * whatever network it is on. NOT_FOUND / CONFLICT for a missing or stopped container,
 * BAD_GATEWAY when nothing listens.
 */
export async function connectPort(agent: AgentClient, id: string, port: number, inspect: (id: string) => Promise<InstanceState | null>): Promise<Duplex> {
  try {
    return await agent.openPort(port);
  } catch (err) {
    if (!(err instanceof AgentUnreachable)) throw err;
    const state = await inspect(id);
    if (!state) throw notFound(`container '${id}' not found`);
    if (state.status !== 'running') throw conflict(`container '${id}' is not running: start the sandbox first`);
    if (!state.ip) throw new UnsupportedError('docker', 'reaching a port of a sandbox that has neither the sandbox agent nor a network');
    return connectTcp(state.ip, port);
  }
}
