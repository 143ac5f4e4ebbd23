import type { InstanceState, WorkerCall, WorkerProcess, WorkerReply, WorkerRequest, WorkersCapability } from '../backend.js';
import type { AgentClient, AgentWorker } from '../agent/agent-client.js';
import { checkWorkerCall, checkWorkerKey, checkWorkerRequest } from '../worker-rules.js';
import { agentOnly, type AgentConnections } from './agent-connections.js';

/**
 * Workers of a Docker sandbox: its agent runs and supervises them (agent/README.md,
 * "Workers"), so a call is one request on the agent's kept-alive socket and a pipe round trip
 * inside the sandbox. A worker runs as the sandbox's default user unless the request names
 * another, like an exec; it outlives the requests that use it, not the sandbox's stop or reset.
 */
export class DockerWorkers implements WorkersCapability {
  constructor(
    private readonly agents: AgentConnections,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
  ) {}

  async ensureWorker(id: string, key: string, request: WorkerRequest): Promise<WorkerProcess> {
    checkWorkerKey(key);
    checkWorkerRequest(request);
    const started = await this.viaAgent(id, (agent) => agent.ensureWorker(key, request));
    return workerFrom(started);
  }

  async callWorker(id: string, key: string, call: WorkerCall): Promise<WorkerReply> {
    checkWorkerKey(key);
    checkWorkerCall(call);
    const reply = await this.viaAgent(id, (agent) => agent.callWorker(key, call));
    return { line: reply.line, stderr: reply.stderr, duration_ms: reply.duration_us / 1000 };
  }

  async stopWorker(id: string, key: string): Promise<void> {
    checkWorkerKey(key);
    await this.viaAgent(id, (agent) => agent.stopWorker(key));
  }

  async listWorkers(id: string): Promise<WorkerProcess[]> {
    return (await this.viaAgent(id, (agent) => agent.listWorkers())).map(workerFrom);
  }

  private viaAgent<T>(id: string, operation: (agent: AgentClient) => Promise<T>): Promise<T> {
    return agentOnly(this.agents, { id, operation, inspect: this.inspect, what: 'persistent workers' });
  }
}

/** A worker as the agent reports it, as the backend interface names it. */
function workerFrom(item: AgentWorker): WorkerProcess {
  return { key: item.key, pid: item.pid, command: item.argv, started: item.started ?? false, started_at: new Date(item.started_at).toISOString() };
}
