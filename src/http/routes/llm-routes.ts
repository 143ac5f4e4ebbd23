import { envelope } from '../../schemas/common.js';
import {
  llmKey,
  llmKeyParams,
  llmSandboxUsage,
  llmUsageParams,
  llmUsageQuery,
  llmUsageReport,
  putLlmKeyBody,
  removedLlmKey,
} from '../../schemas/llm-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { all, named, type RouteAction } from '../route-actions.js';

const tags = ['llm'];

/**
 * The LLM gateway's keys and usage. The gateway itself is not here: it is served on the proxy
 * port (`/llm/<provider>/...`), which sandboxes reach and the API port is not.
 */
export async function llmRoutes(app: App, { services }: RouteContext): Promise<void> {
  const { keys, usage } = services.egress;

  app.get(
    '/llm/keys',
    {
      schema: {
        tags,
        summary: 'List LLM providers and whether the gateway has a key for each (never the key)',
        response: { 200: envelope(llmKey.array()) },
      },
    },
    async () => ok(await keys.list()),
  );

  app.put(
    '/llm/keys/:provider',
    {
      schema: {
        tags,
        summary: "Set a provider's key: the value (kept encrypted, write-only), or a server environment variable's name",
        description:
          'Exactly one of value, env, vault_key_name; base_url sends the provider elsewhere (required for a provider sandboxd does not ' +
          'know, which is then an OpenAI-compatible API). Sandboxes never see the key: they get a placeholder the gateway swaps.',
        params: llmKeyParams,
        body: putLlmKeyBody,
        response: { 200: envelope(llmKey), ...errors(400) },
      },
    },
    async (request) => ok(await keys.put(request.params.provider, request.body)),
  );

  app.delete(
    '/llm/keys/:provider',
    {
      schema: { tags, summary: "Remove a provider's key", params: llmKeyParams, response: { 200: envelope(removedLlmKey), ...errors(400, 404) } },
    },
    async (request) => ok(await keys.remove(request.params.provider)),
  );

  app.get(
    '/llm/usage',
    {
      schema: {
        tags,
        summary: 'Token usage through the gateway: totals, per sandbox and per model, over whole UTC days',
        description: "Counted from each provider's own usage report (no tokenizer); kept in the state store across restarts.",
        querystring: llmUsageQuery,
        response: { 200: envelope(llmUsageReport), ...errors(400) },
      },
    },
    async (request) => ok(await usage.report(request.query)),
  );

  app.get(
    '/llm/usage/:sandbox',
    {
      schema: {
        tags,
        summary: "One sandbox's token usage of all time, per model and per day (also after the sandbox was deleted)",
        params: llmUsageParams,
        response: { 200: envelope(llmSandboxUsage), ...errors(400, 404) },
      },
    },
    async (request) => ok(await usage.sandbox(request.params.sandbox)),
  );
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const llmRouteActions: Record<string, RouteAction | 'open'> = {
  'GET /llm/keys': { action: 'llm.keys.list', resource: all('llm-key') },
  'PUT /llm/keys/:provider': { action: 'llm.keys.set', resource: named('llm-key', 'provider') },
  'DELETE /llm/keys/:provider': { action: 'llm.keys.delete', resource: named('llm-key', 'provider') },
  'GET /llm/usage': { action: 'llm.usage', resource: all('sandbox') },
  'GET /llm/usage/:sandbox': { action: 'llm.usage', resource: named('sandbox', 'sandbox') },
};
