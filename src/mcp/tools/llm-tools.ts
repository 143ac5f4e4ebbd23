import { z } from 'zod';
import { llmUsageQuery } from '../../schemas/llm-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, type Tool } from '../tool.js';

/** LLM usage through the gateway (keys are set over HTTP by an administrator, never through a tool). */
export const llmTools: Tool[] = [
  defineTool({
    name: 'llm_usage',
    title: 'LLM token usage',
    description:
      "Tokens sandboxes used through the server's LLM gateway, as the providers reported them. With sandbox: that sandbox's usage " +
      'of all time as JSON {sandbox, totals, by_model, by_day}. Without: JSON {since, until, totals: {requests, input_tokens, ' +
      'output_tokens, errors, unmetered_requests}, by_sandbox, by_model} over whole UTC days (default the last 30), optionally ' +
      'of one provider.',
    inputSchema: z.strictObject({
      sandbox: z.string().min(1).max(63).optional().meta({ description: 'Sandbox name: its usage of all time' }),
      ...llmUsageQuery.shape,
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ sandbox, ...query }, { api, signal }) => {
      if (sandbox !== undefined) return json(await api.request({ method: 'GET', path: apiPath('llm', 'usage', sandbox) }, signal));
      return json(await api.request({ method: 'GET', path: '/llm/usage', ...(Object.keys(query).length > 0 ? { query } : {}) }, signal));
    },
  }),
];
