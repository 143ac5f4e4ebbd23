import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ApiClient } from '../../src/client/api-client.js';
import { domainTools } from '../../src/services/domains.js';
import { createMcpServer } from '../../src/mcp/server.js';
import { silentLogger } from '../../src/telemetry/logger.js';

/** An MCP server over `api` and an SDK client connected to it through the in-memory transport. */
export interface McpSession {
  client: Client;
  /** Calls a tool and answers its result as it came (isError and all). */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

export async function mcpSession(api: ApiClient): Promise<McpSession> {
  const mcp = await createMcpServer({ api, logger: silentLogger(), tools: domainTools() });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await mcp.server.connect(serverSide);
  const client = new Client({ name: 'unit', version: '1' });
  await client.connect(clientSide);
  return {
    client,
    call: async (name, args = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    async close() {
      await client.close();
      await mcp.close();
    },
  };
}
