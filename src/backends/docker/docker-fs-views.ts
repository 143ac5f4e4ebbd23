import type { Readable } from 'node:stream';
import type { FileArchivesCapability, FileViewsCapability, FsEntry, FsListing, FsWatchEvent, InstanceState, UnpackSummary } from '../backend.js';
import type { AgentClient } from '../agent/agent-client.js';
import { listDirectory, statPath, watchPath } from '../agent/agent-fs.js';
import { agentOnly, type AgentConnections } from './agent-connections.js';

/**
 * File system views of a Docker sandbox, served by its agent as the sandbox's default user
 * (agent/README.md, "File system views"); a sandbox without the agent has none.
 */
export class DockerFileViews implements FileViewsCapability {
  constructor(
    private readonly agents: AgentConnections,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
  ) {}

  listDirectory(id: string, path: string): Promise<FsListing> {
    return this.viaAgent(id, (agent) => listDirectory(agent, path));
  }

  stat(id: string, path: string): Promise<FsEntry> {
    return this.viaAgent(id, (agent) => statPath(agent, path));
  }

  watch(id: string, path: string, options: { recursive: boolean; signal: AbortSignal }): Promise<AsyncIterable<FsWatchEvent>> {
    return this.viaAgent(id, (agent) => watchPath(agent, path, options));
  }

  private viaAgent<T>(id: string, operation: (agent: AgentClient) => Promise<T>): Promise<T> {
    return agentOnly(this.agents, { id, operation, inspect: this.inspect, what: 'file system views' });
  }
}

/** Directories as tar archives, packed and unpacked by the sandbox's agent as its default user (agent/README.md, "Archives"). */
export class DockerFileArchives implements FileArchivesCapability {
  constructor(
    private readonly agents: AgentConnections,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
  ) {}

  packDirectory(id: string, path: string): Promise<Readable> {
    return agentOnly(this.agents, { id, operation: (agent) => agent.packDirectory(path), inspect: this.inspect, what: 'directory archives' });
  }

  unpackInto(id: string, path: string, archive: Buffer): Promise<UnpackSummary> {
    return agentOnly(this.agents, { id, operation: (agent) => agent.unpackInto(path, archive), inspect: this.inspect, what: 'directory archives' });
  }
}
