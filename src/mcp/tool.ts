import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { BackendCapability } from '../schemas/service-schemas.js';
import type { ApiClient } from '../client/api-client.js';

/** What a tool's handler gets besides its arguments. */
export interface ToolContext {
  api: ApiClient;
  /** Aborted when the client cancels the call or goes away; passed on to the API call. */
  signal: AbortSignal;
  /**
   * Reports progress of a long call as an MCP progress notification (`progress` grows with
   * every report); present only when the client asked for progress (sent a progressToken).
   */
  progress?: (progress: number, message?: string) => void;
}

/** A tool as data (docs/decisions.md, "MCP"): name `family_action`, description, zod input schema, handler. */
export interface ToolDefinition<S extends z.ZodObject> {
  name: string;
  title: string;
  /** What it does, units and defaults, and what it returns: the model reads only this and the schema. */
  description: string;
  inputSchema: S;
  annotations?: ToolAnnotations;
  /** The backend capability the tool needs; it is listed only where the server's backend has it (GET /status). */
  capability?: BackendCapability;
  /** Maps the arguments to API calls and shapes the reply; holds no domain logic. */
  handle(args: z.output<S>, context: ToolContext): Promise<CallToolResult>;
}

/** A tool with its argument type erased, as families list it; the server validates arguments first. */
export type Tool = ToolDefinition<z.ZodObject> & { handle(args: unknown, context: ToolContext): Promise<CallToolResult> };

/**
 * Declares a tool; the arguments are typed from its schema. The server parses the arguments with
 * `inputSchema` before it calls `handle`, so the erased handler hands them on as that schema's output.
 */
export const defineTool = <S extends z.ZodObject>(tool: ToolDefinition<S>): Tool => ({
  ...tool,
  handle: (args, context) => tool.handle(args as z.output<S>, context),
});

/** The tools of a family that needs one backend capability, each declaring it. */
export const requiring = (capability: BackendCapability, tools: Tool[]): Tool[] => tools.map((tool) => ({ ...tool, capability }));

/** A result of one text block. */
export const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

/** A result that shows API data as indented JSON. */
export const json = (value: unknown): CallToolResult => text(JSON.stringify(value, null, 2));
