import { z } from 'zod';
import { DEFAULT_DISK_MB, MAX_DISK_MB, MIN_DISK_MB } from '../domain/disk.js';
import { sandboxSecrets } from './proxy-schemas.js';
import { EGRESS_MODES, parseNetworkEntry } from '../domain/egress.js';
import { duration, envObject, imageReference, labels, lifecycle, profile, resourceName, timestamp } from './common.js';
import { volumeMounts, volumeMountsInput } from './volume-schemas.js';

export const sandboxNameParams = z.object({ name: resourceName });
export const sandboxUuidParams = z.object({ uuid: z.uuid({ error: 'must be a UUID' }) });

/** disk_mb in a request (docs/decisions.md, "Disk quota"). */
export const diskMb = z
  .int({ error: 'must be an integer' })
  .min(MIN_DISK_MB, `must be at least ${MIN_DISK_MB}`)
  .max(MAX_DISK_MB, `must be at most ${MAX_DISK_MB}`);

/** One allow / deny list: host-name globs, addresses, CIDR ranges (each checked, its index named). */
const networkEntries = z
  .array(
    z.string({ error: 'must be a string' }).check((ctx) => {
      const parsed = parseNetworkEntry(ctx.value);
      if (typeof parsed === 'string') ctx.issues.push({ code: 'custom', message: parsed, input: ctx.value });
    }),
    { error: 'must be an array of host name globs, addresses or CIDR ranges' },
  )
  .max(256, 'at most 256 entries');

const egressMode = z.enum(EGRESS_MODES, { error: `must be one of ${EGRESS_MODES.join(', ')}` });

/** The `network` field of a create (DECISIONS-WAVE2 5.4, "enforced egress"). */
export const networkInput = z
  .strictObject({
    egress: egressMode.optional().meta({
      description:
        "open: the outside directly (never the host's addresses nor private, link-local or cloud-internal ranges unless allowed); proxy: only the egress proxy on the gateway (HTTP_PROXY), nothing else; none: no network. Default: open, none for restrictive (which refuses the others); a non-empty allow implies proxy",
    }),
    allow: networkEntries.optional().meta({
      description:
        'proxy: the hosts (globs such as *.github.com), addresses and CIDR ranges the proxy lets through. open: addresses and CIDR ranges of the host, private or link-local networks that the packet filter lets this sandbox reach. Each may name a port (127.0.0.1:8080, api.example.com:443, [::1]:8080): that port alone; without one, every port',
    }),
    deny: networkEntries.optional().meta({ description: 'Refused even where allow matches (open: addresses and CIDR ranges only)' }),
  })
  .meta({ id: 'CreateSandboxNetwork' });

/** PATCH: new allow / deny lists, applied at once (egress itself cannot change). */
export const networkPatch = z
  .strictObject({
    egress: egressMode.optional().meta({ description: 'Only the sandbox\'s current egress (it cannot change)' }),
    allow: networkEntries.optional().meta({ description: 'Replaces the allow list' }),
    deny: networkEntries.optional().meta({ description: 'Replaces the deny list' }),
  })
  .meta({ id: 'PatchSandboxNetwork' });

export const networkView = z
  .object({ egress: egressMode, allow: z.array(z.string()), deny: z.array(z.string()) })
  .meta({ id: 'SandboxNetwork', description: "What the sandbox's network reaches (README, 'Security model')" });

export const createSandboxBody = z
  .strictObject({
    name: resourceName,
    image: imageReference.optional().meta({ description: 'Container image; the server default when omitted' }),
    vcpus: z.int({ error: 'must be an integer' }).min(1, 'must be at least 1').optional().meta({ description: 'CPU cores, default 1' }),
    memory_mb: z.int({ error: 'must be an integer' }).min(32, 'must be at least 32').optional().meta({ description: 'Memory limit in MiB, default 512' }),
    disk_mb: diskMb.optional().meta({
      description: `What the sandbox may write in MiB, over all its writable paths together (/workspace, /tmp, the root where writable); default ${DEFAULT_DISK_MB} (or the engine's storage size where smaller). A write past it fails inside the sandbox with EDQUOT or ENOSPC. At most the engine's storage size; 422 UNSUPPORTED where the engine's storage cannot bound it`,
    }),
    profile: profile.optional().meta({ description: 'Security profile, default moderate' }),
    labels: labels.optional(),
    description: z.string().max(1024).optional(),
    lifecycle: lifecycle.optional(),
    env: envObject.optional().meta({ description: 'Environment of every process in the sandbox' }),
    ttl: duration.optional().meta({ description: 'Time to live (sets expires_at), e.g. 2h' }),
    source_url: z.string().min(1).max(2048).optional().meta({ description: 'git repository (https, ssh or git URL) cloned into /workspace' }),
    source_ref: z.string().min(1).max(255).optional().meta({ description: 'Branch, tag or commit of source_url' }),
    llm_budget_tokens: z
      .int({ error: 'must be an integer' })
      .min(1, 'must be at least 1')
      .max(Number.MAX_SAFE_INTEGER, 'must be at most 2^53-1')
      .optional()
      .meta({ description: 'LLM tokens (input and output) the sandbox may use through the gateway; past it the gateway answers 429 and publishes llm.budget_exceeded' }),
    secrets: sandboxSecrets.optional(),
    network: networkInput.optional(),
    volumes: volumeMountsInput.optional().meta({
      description: 'Named volumes (POST /volumes) mounted at absolute paths, each {name, path, read_only?} or "name:/path[:ro]"; their contents outlive the sandbox and are not in its snapshots',
    }),
  })
  .refine(({ secrets, env }) => !secrets || !env || Object.keys(secrets).every((name) => env[name] === undefined), {
    message: 'a name is either in env or in secrets, not both',
    path: ['secrets'],
  })
  .meta({ id: 'CreateSandbox' });

export const patchSandboxBody = z
  .strictObject({
    labels: labels.optional().meta({ description: 'Replaces all labels' }),
    description: z.string().max(1024).optional(),
    lifecycle: lifecycle.nullable().optional().meta({ description: 'null clears the policy' }),
    ttl: duration.optional().meta({ description: 'Expire this long from now (sets expires_at), e.g. 2h' }),
    expires_at: z.null({ error: 'only null, which clears the expiry (set one with ttl)' }).optional().meta({ description: 'null clears the expiry: the sandbox never expires' }),
    network: networkPatch.optional(),
  })
  .refine((body) => body.ttl === undefined || body.expires_at === undefined, { message: 'give ttl or expires_at: null, not both', path: ['ttl'] })
  .meta({ id: 'PatchSandbox' });

/** The statuses GET /sandboxes filters by. */
export const sandboxStatusValue = z.enum(['running', 'stopped', 'archiving', 'archived']);

export const listSandboxesQuery = z.strictObject({
  label: z
    .union([z.string(), z.array(z.string())])
    .optional()
    .meta({ description: 'key:value, repeatable; several are ANDed' }),
  status: z
    .union([sandboxStatusValue, z.array(sandboxStatusValue)])
    .optional()
    .meta({ description: 'running, stopped, archiving or archived; repeatable, several are ORed' }),
  internal: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .transform((value) => value === 'true')
    .meta({ description: "true: list the server's own sandboxes too (durable objects' `obj-<hex>`), which are left out by default" }),
});

export const sandboxStatus = z.enum(['running', 'stopped', 'lost', 'archiving', 'archived']).meta({
  description:
    'archiving is seen only while an archive is under way; lost: the container was removed outside sandboxd (status_reason says when), and start makes a new, empty one',
});

export const sandboxSummary = z
  .object({
    name: z.string(),
    uuid: z.string(),
    status: sandboxStatus,
    status_reason: z.string().optional().meta({ description: 'Why the sandbox has its status, where that needs saying (lost)' }),
    backend: z.string(),
    ip: z.string().optional(),
    image: z.string(),
    labels: z.record(z.string(), z.string()),
    description: z.string().optional(),
    profile: profile,
    internal: z.literal(true).optional().meta({ description: "The server made it for itself (a durable object's sandbox): GET /sandboxes lists it only with ?internal=true" }),
    created_at: timestamp,
  })
  .meta({ id: 'SandboxSummary' });

export const sandboxDetail = sandboxSummary
  .extend({
    vcpus: z.int(),
    memory_mb: z.int(),
    disk_mb: z.int().optional().meta({ description: 'What the sandbox may write in MiB over all its writable paths; absent: no bound (its engine has no disk quota, or it was made before disk_mb)' }),
    lifecycle: lifecycle.optional(),
    last_activity_at: timestamp.optional(),
    expires_at: timestamp.optional(),
    archived_at: timestamp.optional(),
    archived_reason: z.string().optional(),
    source_url: z.string().optional(),
    source_ref: z.string().optional(),
    runtime: z.string().optional().meta({ description: 'OCI runtime (runc, runsc) while the container exists' }),
    restored_from: z.string().optional().meta({ description: 'The snapshot this sandbox was restored from' }),
    secret_mappings: z.record(z.string(), z.string()).optional().meta({
      description: "{ENV_NAME: host} of the sandbox's secrets; never their values (the sandbox's env holds placeholders the egress proxy swaps toward host)",
    }),
    network: networkView,
    volumes: volumeMounts.optional().meta({ description: 'The named volumes it mounts' }),
    recreated: z
      .boolean()
      .optional()
      .meta({ description: 'In the answer to start: true when the sandbox was lost and a new, empty container was made from its settings' }),
  })
  .meta({ id: 'Sandbox' });

export type CreateSandboxInput = z.infer<typeof createSandboxBody>;
export type PatchSandboxInput = z.infer<typeof patchSandboxBody>;
export type NetworkInput = z.infer<typeof networkInput>;
export type NetworkPatch = z.infer<typeof networkPatch>;
export type SandboxSummary = z.infer<typeof sandboxSummary>;
export type SandboxDetail = z.infer<typeof sandboxDetail>;
