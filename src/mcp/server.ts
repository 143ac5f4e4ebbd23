import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import { isServiceError } from '../errors.js';
import type { BackendCapability } from '../schemas/service-schemas.js';
import { VERSION } from '../paths.js';
import type { Logger } from '../telemetry/logger.js';
import type { ApiClient } from '../client/api-client.js';
import { capOutput } from './output-cap.js';
import type { Tool, ToolContext } from './tool.js';
import { toolError } from './tool-errors.js';

const INSTRUCTIONS =
  'sandboxd runs commands in isolated Linux sandboxes (containers). For a one-off command use sandbox_run. For work that ' +
  'needs files or installed packages across calls, sandbox_create a sandbox, then sandbox_exec and the sandbox_file_* ' +
  'tools, and sandbox_remove it when done. A command is an argv array run without a shell, or one string run with ' +
  'sh -c. The working directory is /workspace.';

/** What the server needs: the API it works through, a stderr logger, and the tools it offers (every domain's: `domainTools()`). */
export interface McpServerOptions {
  api: ApiClient;
  logger: Logger;
  tools: readonly Tool[];
}

/** The MCP server and a close that lets cancelled calls finish their clean-up (a run removes its sandbox). */
export interface SandboxdMcpServer {
  server: McpServer;
  /** Closes the transport, which cancels calls in flight, and waits for them to settle. */
  close(): Promise<void>;
}

/**
 * The MCP face: registers the tools the server's backend can serve on the SDK's McpServer (a
 * tool that needs a capability the backend lacks is not listed; the backend's capabilities come
 * from GET /status). Each call runs the tool's handler with the client's cancellation signal;
 * text blocks are capped at 16 KB (images never are), and failures become results with
 * `isError: true` and the service's message, whose next step names the tool that takes it
 * (tool-errors.ts). The SDK itself answers
 * malformed arguments (as `isError` results naming the field).
 */
export async function createMcpServer({ api, logger, tools }: McpServerOptions): Promise<SandboxdMcpServer> {
  const server = new McpServer({ name: 'sandboxd', version: VERSION }, { instructions: INSTRUCTIONS });
  // Malformed messages and transport failures are reported here, not to the client: log them.
  server.server.onerror = (err) => logger.warn({ err }, 'MCP protocol error');
  const pending = new Set<Promise<unknown>>();
  const capabilities = await backendCapabilities(api, logger);
  for (const tool of tools) {
    if (tool.capability && capabilities && !capabilities.has(tool.capability)) continue;
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema,
        ...(tool.annotations ? { annotations: { title: tool.title, ...tool.annotations } } : {}),
      },
      async (args: unknown, extra) => {
        const started = Date.now();
        const call = callTool(tool, args, { api, signal: extra.signal, ...progressOf(extra) }, logger);
        pending.add(call);
        const result = await call.finally(() => pending.delete(call));
        logger.debug({ tool: tool.name, ms: Date.now() - started, error: result.isError === true }, 'tool call');
        return result;
      },
    );
  }
  return {
    server,
    async close() {
      await server.close();
      await Promise.allSettled(pending);
    },
  };
}

/**
 * The capabilities of the server's backend; undefined (every tool is listed) when the server
 * cannot say now, e.g. it is not up yet: a tool it cannot serve then answers UNSUPPORTED.
 */
async function backendCapabilities(api: ApiClient, logger: Logger): Promise<Set<BackendCapability> | undefined> {
  try {
    const status = await api.request<{ capabilities?: BackendCapability[] }>({ method: 'GET', path: '/status' });
    return status.capabilities ? new Set(status.capabilities) : undefined;
  } catch (err) {
    logger.warn({ err, target: api.target }, 'could not read the server status: listing every tool');
    return undefined;
  }
}

/** A progress reporter when the client sent a progressToken with the call; notifications that fail are dropped. */
function progressOf(extra: {
  _meta?: { progressToken?: string | number };
  sendNotification: (notification: ServerNotification) => Promise<void>;
}): Pick<ToolContext, 'progress'> {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return {};
  return {
    progress: (progress, message) =>
      void extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, ...(message ? { message } : {}) } }).catch(() => undefined),
  };
}

async function callTool(tool: Tool, args: unknown, context: ToolContext, logger: Logger): Promise<CallToolResult> {
  try {
    const result = await tool.handle(args, context);
    return { ...result, content: result.content.map((block) => (block.type === 'text' ? { ...block, text: capOutput(block.text) } : block)) };
  } catch (err) {
    if (isServiceError(err)) return toolError(err);
    if (context.signal.aborted) return failure('the call was cancelled');
    logger.error({ err, tool: tool.name }, 'tool failed');
    return failure(`internal error in ${tool.name}: see the sandboxd log (stderr)`);
  }
}

const failure = (message: string): CallToolResult => ({ content: [{ type: 'text', text: message }], isError: true });
