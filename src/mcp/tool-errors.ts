import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { withNextStep, type NextStepRenderers, type ServiceError } from '../errors.js';

/** The next steps in the words of the MCP face: the tool that does it, with its arguments. */
const TOOL_NEXT_STEPS: NextStepRenderers = {
  start: ({ sandbox }) => `start it with sandbox_start (name '${sandbox}')`,
  recover: ({ sandbox, then }) =>
    then === 'start'
      ? `recover it with sandbox_recover (name '${sandbox}'), then start it with sandbox_start`
      : `recover it first with sandbox_recover (name '${sandbox}')`,
  browser_open: ({ sandbox, page }) => `open it with browser_open (name '${sandbox}', page '${page}')`,
  browser_snapshot: ({ sandbox, page, use_refs }) =>
    `take a new snapshot (browser_snapshot (name '${sandbox}', page '${page}'))${use_refs ? ' and use its refs' : ''}`,
  list_directory: ({ sandbox, path }) => `list it with sandbox_file_list (name '${sandbox}', path '${path}')`,
  // No tool manages images, volumes, proxy hooks, LLM keys or terminals: the step names the server's HTTP route.
  list_images: () => 'the built images are listed by GET /images of the server (no tool lists them)',
  create_volume: ({ volume }) => `create it with POST /volumes {"name": "${volume}"} on the server (no tool creates volumes)`,
  store_execute: ({ store }) => (store ? `use store_execute (store '${store}')` : 'use store_execute'),
  store_ops: ({ store, ops }) => `use ${ops.map((op) => `store_${op}`).join(' or ')} (store '${store}')`,
  register_class: ({ class: name }) => `register it first with object_class_define (name '${name}')`,
  delete_proxy_hook: ({ hook }) => `delete it first with DELETE /proxy/hooks/${hook} on the server (no tool deletes hooks)`,
  set_llm_key: ({ provider }) => `an administrator stores the key with PUT /llm/keys/${provider ?? '{provider}'} on the server`,
  mint_terminal_token: ({ sandbox }) => `mint one with POST /sandboxes/${sandbox}/pty/token on the server`,
};

/**
 * A service error as a tool result: `isError`, the message with its next step naming the
 * tool, and the error's `details` as JSON in a second block when it has them.
 */
export function toolError(err: ServiceError): CallToolResult {
  const content: CallToolResult['content'] = [{ type: 'text', text: withNextStep(err.message, err.hint, TOOL_NEXT_STEPS) }];
  if (err.details) content.push({ type: 'text', text: `details: ${JSON.stringify(err.details, null, 2)}` });
  return { content, isError: true };
}
