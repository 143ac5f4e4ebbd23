import { z } from 'zod';
import { resourceName } from './common.js';

const providerName = z
  .string({ error: 'must be a string' })
  .regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, 'must match ^[a-z0-9][a-z0-9_-]{0,31}$ (openai, anthropic, google, or a name of your own)')
  .meta({ description: 'openai, anthropic, google (aliases gemini, claude), or an OpenAI-compatible provider of [llm.providers] or added with a base_url' });

export const llmKeyParams = z.strictObject({ provider: providerName });

const envName = z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(128, 'must be at most 128 characters');

export const putLlmKeyBody = z
  .strictObject({
    value: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(4096, 'must be at most 4096 characters').optional().meta({
      description: 'The key itself: kept encrypted (SecretBox), never shown again (views show its last 4 characters)',
    }),
    env: envName.optional().meta({ description: "Name of a server environment variable holding the key, read at each request" }),
    vault_key_name: envName.optional().meta({ description: 'Alias of env' }),
    base_url: z.string({ error: 'must be a string' }).min(1).max(2048).optional().meta({
      description: "Upstream to forward to instead of the provider's (required for a provider sandboxd does not know: an OpenAI-compatible API)",
    }),
  })
  .meta({ id: 'PutLlmKey', description: 'Exactly one of value, env, vault_key_name' });

export const llmKey = z
  .object({
    provider: z.string(),
    domain: z.string().meta({ description: 'The host the key is sent to' }),
    configured: z.boolean().meta({ description: 'Whether the gateway has a key to send (a stored one, or a set environment variable)' }),
    source: z.enum(['stored', 'env']).nullable().meta({ description: 'stored (encrypted in the state store), env (a server variable), null without a key' }),
    last4: z.string().nullable().meta({ description: 'Last 4 characters of a stored key, to tell keys apart' }),
    base_url: z.string(),
    updated_at: z.string().nullable(),
  })
  .meta({ id: 'LlmKey' });

export const removedLlmKey = z.object({ removed: z.string() });

const day = z.string().meta({ description: 'A UTC day, YYYY-MM-DD' });
const dayOrTime = z
  .string({ error: 'must be a string' })
  .regex(/^\d{4}-\d{2}-\d{2}/, 'must be a date (YYYY-MM-DD) or an RFC 3339 timestamp')
  .meta({ description: 'A date (YYYY-MM-DD) or an RFC 3339 timestamp; usage is kept per UTC day, so its day is used' });

export const llmUsageQuery = z.strictObject({
  since: dayOrTime.optional().meta({ description: 'First day, included; default 29 days before until' }),
  until: dayOrTime.optional().meta({ description: 'Last day, included; default today (UTC)' }),
  provider: providerName.optional(),
});

export const llmUsageParams = z.strictObject({ sandbox: resourceName });

const sums = {
  requests: z.int(),
  input_tokens: z.int(),
  output_tokens: z.int(),
  errors: z.int().meta({ description: 'Requests answered with an error (by the provider, or 502 when it could not be reached)' }),
  unmetered_requests: z.int().meta({ description: 'Successful requests whose answer reported no usage the gateway could read' }),
};

const byModel = z.object({ provider: z.string(), model: z.string().meta({ description: 'As the provider named it; "" when unknown' }), ...sums });

export const llmUsageReport = z
  .object({
    since: day,
    until: day,
    totals: z.object(sums),
    by_sandbox: z.array(z.object({ sandbox: z.string(), ...sums })),
    by_model: z.array(byModel),
  })
  .meta({ id: 'LlmUsage' });

export const llmSandboxUsage = z
  .object({
    sandbox: z.string(),
    totals: z.object(sums),
    by_model: z.array(byModel),
    by_day: z.array(z.object({ day, ...sums })),
  })
  .meta({ id: 'LlmSandboxUsage' });

export type PutLlmKeyInput = z.infer<typeof putLlmKeyBody>;
export type LlmUsageQuery = z.infer<typeof llmUsageQuery>;
