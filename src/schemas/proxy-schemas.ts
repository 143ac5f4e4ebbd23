import { z } from 'zod';
import { destinationError } from '../domain/destinations.js';
import { parseSecretHost } from '../domain/secret-hosts.js';
import { labels, resourceName, timestamp } from './common.js';

/** A host-name glob (`api.github.com`, `*.example.com`) or an IP / CIDR; the message names what is wrong. */
export const hostGlob = z
  .string({ error: 'must be a string' })
  .check((ctx) => {
    const problem = destinationError(ctx.value);
    if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  })
  .meta({ description: 'A host-name glob (`*` is any run of characters: `*.github.com`), or an IP address or CIDR for literal addresses' });

const SANDBOX_GLOB = /^[a-z0-9*][a-z0-9_.*-]{0,62}$/;

export const hookMatch = z
  .strictObject({
    host: hostGlob.optional(),
    method: z
      .string({ error: 'must be a string' })
      .regex(/^[A-Za-z]{1,16}$/, 'must be an HTTP method such as GET, POST or CONNECT')
      .transform((m) => m.toUpperCase())
      .optional(),
    path_prefix: z.string({ error: 'must be a string' }).startsWith('/', 'must begin with /').max(2048).optional().meta({
      description:
        'Matches requests whose path, as the upstream reads it, begins with it: percent-encoded characters decoded, ;parameters, duplicate slashes and dot segments removed (/%62locked, //blocked and /;/blocked are /blocked); CONNECT tunnels have no path and never match one',
    }),
    path_ignore_case: z.boolean({ error: 'must be true or false' }).optional().meta({
      description: 'true: path_prefix matches in any case (/BLOCKED too), for upstreams whose paths ignore case; default false',
    }),
    sandbox: z.string({ error: 'must be a string' }).regex(SANDBOX_GLOB, "must be a sandbox name or a glob of names ('*' any run of characters)").optional(),
    labels: labels.optional().meta({ description: 'Sandbox labels that must all be present with these values' }),
  })
  .meta({ description: 'Every field given must match; no field matches every request' });

const webhookTarget = z.strictObject({
  type: z.literal('webhook'),
  url: z
    .string({ error: 'must be a string' })
    .max(2048)
    .refine((value) => {
      try {
        return ['http:', 'https:'].includes(new URL(value).protocol);
      } catch {
        return false;
      }
    }, 'must be an http:// or https:// URL'),
  timeout_ms: z.int({ error: 'must be an integer' }).min(1, 'must be at least 1').max(60_000, 'must be at most 60000').default(2000),
  fail: z.enum(['open', 'closed'], { error: "must be open (allow when the webhook fails or times out) or closed (deny)" }),
});

const blockTarget = z.strictObject({
  type: z.literal('block'),
  status: z.int({ error: 'must be an integer' }).min(400, 'must be a 4xx or 5xx status').max(599, 'must be a 4xx or 5xx status').default(403),
});

const auditTarget = z.strictObject({ type: z.literal('audit') });

export const hookTarget = z
  .discriminatedUnion('type', [webhookTarget, blockTarget, auditTarget], { error: 'type must be webhook, block or audit' });

export const createProxyHookBody = z
  .strictObject({
    name: resourceName,
    event: z.enum(['on_request', 'on_response'], { error: 'must be on_request or on_response' }),
    match: hookMatch.optional(),
    target: hookTarget,
  })
  .refine((body) => body.event === 'on_request' || body.target.type !== 'block', {
    message: 'a block target applies to on_request hooks only (on_response hooks are told after the request)',
    path: ['target', 'type'],
  })
  .meta({ id: 'CreateProxyHook' });

/** A hook as answered: every default filled in. */
export const proxyHook = z
  .object({
    name: z.string(),
    event: z.enum(['on_request', 'on_response']),
    match: z.object({
      host: z.string().optional(),
      method: z.string().optional(),
      path_prefix: z.string().optional(),
      path_ignore_case: z.boolean().optional(),
      sandbox: z.string().optional(),
      labels: z.record(z.string(), z.string()).optional(),
    }),
    target: z.discriminatedUnion('type', [
      z.object({ type: z.literal('webhook'), url: z.string(), timeout_ms: z.int(), fail: z.enum(['open', 'closed']) }),
      z.object({ type: z.literal('block'), status: z.int() }),
      z.object({ type: z.literal('audit') }),
    ]),
    created_at: timestamp,
  })
  .meta({ id: 'ProxyHook' });

export const proxyHookParams = z.strictObject({ name: resourceName });
export const proxyHookQuery = z.strictObject({ name: resourceName });

export const proxyLogQuery = z.strictObject({
  sandbox: resourceName.optional(),
  limit: z.coerce.number().int().min(1).max(10_000).default(100).meta({ description: 'At most this many, newest first; default 100' }),
});

export const proxyLogEntry = z
  .object({
    timestamp,
    sandbox: z.string(),
    sandbox_uuid: z.string(),
    method: z.string(),
    url: z.string().meta({ description: 'For CONNECT: https://host:port' }),
    host: z.string(),
    port: z.int(),
    decision: z.enum(['allow', 'deny']),
    reason: z.string(),
    hook: z.string().optional().meta({ description: 'The hook that decided, if one did' }),
    status: z.int().meta({ description: 'The status the sandbox got (200 for an opened tunnel; 0 when the connection failed before an answer)' }),
    bytes_in: z.int().meta({ description: 'Bytes from the upstream to the sandbox' }),
    bytes_out: z.int().meta({ description: 'Bytes from the sandbox to the upstream' }),
    latency_ms: z.number(),
  })
  .meta({ id: 'ProxyLogEntry' });

const SECRET_ENV = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A secret's host: a host glob or IP/CIDR with an optional port (`api.example.com:8443`, `[::1]:8443`). */
const secretHost = z
  .string({ error: 'must be a string' })
  .check((ctx) => {
    const parsed = parseSecretHost(ctx.value);
    if (typeof parsed === 'string') ctx.issues.push({ code: 'custom', message: parsed, input: ctx.value });
  })
  .meta({
    description:
      'A host-name glob or an IP/CIDR, with an optional port (`api.example.com:8443`, `[::1]:8443`); without one, the default port of the request (80 for http://, 443 for https://)',
  });

/** `secrets` at sandbox create: `{ENV_NAME: {value, host}}`. */
export const sandboxSecrets = z
  .record(
    z.string().regex(SECRET_ENV, 'secret names are environment variable names [A-Za-z_][A-Za-z0-9_]*'),
    z.strictObject({
      value: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(65_536, 'must be at most 65536 characters'),
      host: secretHost,
      intercept_tls: z.boolean({ error: 'must be true or false' }).default(false).meta({
        description:
          "Also swap it in HTTPS requests: the proxy terminates TLS for this secret's host (and port) only, with a certificate of the server's own CA, which the sandbox then trusts; every other host is tunnelled untouched",
      }),
    }),
    { error: 'must be an object {ENV_NAME: {value, host}}' },
  )
  .refine((secrets) => Object.keys(secrets).length <= 64, 'at most 64 secrets')
  .meta({
    description:
      'The sandbox env gets a placeholder (sbx-secret-...) per name, never the value; the egress proxy swaps the value in for the placeholder in request headers (and basic-auth) sent to `host` only, on plain-HTTP requests through the proxy and, with `intercept_tls`, on HTTPS ones; the value is replaced by the placeholder again in what the upstream answers',
  });

export type CreateProxyHookInput = z.infer<typeof createProxyHookBody>;
export type ProxyHook = z.infer<typeof proxyHook>;
export type ProxyHookMatch = z.infer<typeof hookMatch>;
export type ProxyHookTarget = z.infer<typeof hookTarget>;
export type ProxyLogEntry = z.infer<typeof proxyLogEntry>;
export type SandboxSecretsInput = z.infer<typeof sandboxSecrets>;
