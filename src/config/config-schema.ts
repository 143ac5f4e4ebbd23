import { z } from 'zod';
import { PRINCIPAL_NAME_PATTERN, type ApiKey } from '../domain/principals.js';
import { BACKEND_IDS } from '../domain/backend-ids.js';
import { DEFAULT_IMAGE } from '../images/catalog.js';
import { parseImageDetection } from '../images/image-detection.js';
import { MAX_POOL_SIZE, parsePoolSizes } from './pool-sizes.js';

/**
 * The one typed configuration of `sandboxd serve`. Every option has a TOML key, an
 * environment twin and a start flag; `loadConfig` merges them as
 * defaults < TOML file < SERVICE_* environment < flags.
 */
export const OPTIONS = {
  host: { toml: 'server.host', env: 'SERVICE_HOST', flag: '--host' },
  port: { toml: 'server.port', env: 'SERVICE_PORT', flag: '--port' },
  dataDir: { toml: 'server.data_dir', env: 'SERVICE_DATA_DIR', flag: '--data-dir' },
  databaseUrl: { toml: 'state.database_url', env: 'SERVICE_DATABASE_URL', flag: '--database-url' },
  tls: { toml: 'server.tls', env: 'SERVICE_TLS', flag: '--tls' },
  tlsCert: { toml: 'server.tls_cert', env: 'SERVICE_TLS_CERT', flag: '--tls-cert' },
  tlsKey: { toml: 'server.tls_key', env: 'SERVICE_TLS_KEY', flag: '--tls-key' },
  apiKeys: { toml: 'api.api_key', env: 'SERVICE_API_KEY', flag: '--api-key' },
  apiKeyFile: { toml: 'api.api_key_file', env: 'SERVICE_API_KEY_FILE', flag: '--api-key-file' },
  allowSudoExec: { toml: 'api.allow_sudo_exec', env: 'SERVICE_ALLOW_SUDO_EXEC', flag: '--allow-sudo-exec' },
  maxSandboxes: { toml: 'api.max_sandboxes', env: 'SERVICE_MAX_SANDBOXES', flag: '--max-sandboxes' },
  backend: { toml: 'sandboxes.backend', env: 'SERVICE_BACKEND', flag: '--backend' },
  defaultImage: { toml: 'sandboxes.default_image', env: 'SERVICE_DEFAULT_IMAGE', flag: '--default-image' },
  pidsLimit: { toml: 'sandboxes.pids_limit', env: 'SERVICE_PIDS_LIMIT', flag: '--pids-limit' },
  sourceAllowedHosts: { toml: 'sandboxes.source_allowed_hosts', env: 'SERVICE_SOURCE_ALLOWED_HOSTS', flag: '--source-allowed-hosts' },
  networkName: { toml: 'network.name', env: 'SERVICE_NETWORK_NAME', flag: '--network-name' },
  snapshotPrefix: { toml: 'sandboxes.snapshot_prefix', env: 'SERVICE_SNAPSHOT_PREFIX', flag: '--snapshot-prefix' },
  batchConcurrency: { toml: 'runs.batch_concurrency', env: 'SERVICE_BATCH_CONCURRENCY', flag: '--batch-concurrency' },
  imageDetection: { toml: 'runs.image_detection', env: 'SERVICE_IMAGE_DETECTION', flag: '--image-detection' },
  buildConcurrency: { toml: 'images.build_concurrency', env: 'SERVICE_BUILD_CONCURRENCY', flag: '--build-concurrency' },
  buildPidsLimit: { toml: 'images.build_pids_limit', env: 'SERVICE_BUILD_PIDS_LIMIT', flag: '--build-pids-limit' },
  buildCpuShares: { toml: 'images.build_cpu_shares', env: 'SERVICE_BUILD_CPU_SHARES', flag: '--build-cpu-shares' },
  buildStepDiskMb: { toml: 'images.build_step_disk_mb', env: 'SERVICE_BUILD_STEP_DISK_MB', flag: '--build-step-disk-mb' },
  buildDiskMb: { toml: 'images.build_disk_mb', env: 'SERVICE_BUILD_DISK_MB', flag: '--build-disk-mb' },
  poolSize: { toml: 'pool.size', env: 'SERVICE_POOL_SIZE', flag: '--pool-size' },
  poolSizes: { toml: 'pool.sizes', env: 'SERVICE_POOL_SIZES', flag: '--pool-sizes' },
  poolMemoryMb: { toml: 'pool.memory_mb', env: 'SERVICE_POOL_MEMORY_MB', flag: '--pool-memory-mb' },
  gcInterval: { toml: 'lifecycle.gc_interval', env: 'SERVICE_GC_INTERVAL', flag: '--gc-interval' },
  reconcileInterval: { toml: 'lifecycle.reconcile_interval', env: 'SERVICE_RECONCILE_INTERVAL', flag: '--reconcile-interval' },
  events: { toml: 'events.enabled', env: 'SERVICE_EVENTS', flag: '--events' },
  webhookUrls: { toml: 'events.webhook_urls', env: 'SERVICE_WEBHOOK_URL', flag: '--webhook-url' },
  webhookSecret: { toml: 'events.webhook_secret', env: 'SERVICE_WEBHOOK_SECRET', flag: '--webhook-secret' },
  eventsBacklog: { toml: 'events.backlog', env: 'SERVICE_EVENTS_BACKLOG', flag: '--events-backlog' },
  eventsHeartbeat: { toml: 'events.heartbeat_seconds', env: 'SERVICE_EVENTS_HEARTBEAT', flag: '--events-heartbeat' },
  otelEndpoint: { toml: 'events.otel_endpoint', env: 'SERVICE_OTEL_ENDPOINT', flag: '--otel-endpoint' },
  logLevel: { toml: 'server.log_level', env: 'SERVICE_LOG_LEVEL', flag: '--log-level' },
  logFormat: { toml: 'server.log_format', env: 'SERVICE_LOG_FORMAT', flag: '--log-format' },
  objectConcurrency: { toml: 'objects.concurrency', env: 'SERVICE_OBJECT_CONCURRENCY', flag: '--object-concurrency' },
  objectMaxStorage: { toml: 'objects.max_storage_bytes', env: 'SERVICE_OBJECT_MAX_STORAGE', flag: '--object-max-storage' },
  orchestrationConcurrency: { toml: 'orchestrations.concurrency', env: 'SERVICE_ORCHESTRATION_CONCURRENCY', flag: '--orchestration-concurrency' },
  orchestrationRetention: { toml: 'orchestrations.retention', env: 'SERVICE_ORCHESTRATION_RETENTION', flag: '--orchestration-retention' },
  orchestrationMaxSteps: { toml: 'orchestrations.max_steps', env: 'SERVICE_ORCHESTRATION_MAX_STEPS', flag: '--orchestration-max-steps' },
  orchestrationMaxHistoryEvents: { toml: 'orchestrations.max_history_events', env: 'SERVICE_ORCHESTRATION_MAX_HISTORY_EVENTS', flag: '--orchestration-max-history-events' },
  orchestrationMaxOutputBytes: { toml: 'orchestrations.max_output_bytes', env: 'SERVICE_ORCHESTRATION_MAX_OUTPUT_BYTES', flag: '--orchestration-max-output-bytes' },
  storeWorkers: { toml: 'stores.workers', env: 'SERVICE_STORE_WORKERS', flag: '--store-workers' },
  storeTimeout: { toml: 'stores.timeout_ms', env: 'SERVICE_STORE_TIMEOUT', flag: '--store-timeout' },
  storeAllowedHosts: { toml: 'stores.allowed_hosts', env: 'SERVICE_STORE_ALLOWED_HOSTS', flag: '--store-allowed-hosts' },
  secretKeyFile: { toml: 'secrets.key_file', env: 'SERVICE_SECRET_KEY_FILE', flag: '--secret-key-file' },
  proxy: { toml: 'proxy.enabled', env: 'SERVICE_PROXY', flag: '--proxy' },
  proxyPort: { toml: 'proxy.port', env: 'SERVICE_PROXY_PORT', flag: '--proxy-port' },
  proxyUpstreamCaFile: { toml: 'proxy.upstream_ca_file', env: 'SERVICE_PROXY_UPSTREAM_CA_FILE', flag: '--proxy-upstream-ca-file' },
  previewDomain: { toml: 'preview.domain', env: 'SERVICE_PREVIEW_DOMAIN', flag: '--preview-domain' },
  // TOML (and env) only: a table of tables has no flag form.
  llmProviders: { toml: 'llm.providers', env: 'SERVICE_LLM_PROVIDERS', flag: '[llm.providers]' },
  llmStreamUsage: { toml: 'llm.stream_usage', env: 'SERVICE_LLM_STREAM_USAGE', flag: '[llm].stream_usage' },
  policyFile: { toml: 'policy.file', env: 'SERVICE_POLICY_FILE', flag: '--policy-file' },
  policyMode: { toml: 'policy.mode', env: 'SERVICE_POLICY_MODE', flag: '--policy-mode' },
  policyAuditAllows: { toml: 'policy.audit_allows', env: 'SERVICE_POLICY_AUDIT_ALLOWS', flag: '--policy-audit-allows' },
} as const;

/** TOML keys without a flag or an environment twin: tables of their own. */
export const TOML_ONLY = { namedKeys: 'api.keys' } as const;

export type OptionName = keyof typeof OPTIONS;

type SectionOf<Key> = Key extends `${infer Section}.${string}` ? Section : never;
/** The config's sections: the table of each option's TOML key (`pool` for `pool.size`). */
export type SectionName = SectionOf<(typeof OPTIONS)[OptionName]['toml']>;
type OptionsIn<S extends SectionName> = { [K in OptionName]: (typeof OPTIONS)[K]['toml'] extends `${S}.${string}` ? K : never }[OptionName];

/** A host name, an IPv4 or IPv6 address (bracketed or not), optionally with a /prefix. */
const SOURCE_HOST_ENTRY = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[?[0-9A-Fa-f:.]+\]?)(?:\/\d{1,3})?$/;

/** A host name or address with `*` and `?` wildcards, or an address with a /prefix (a CIDR). */
const STORE_HOST_GLOB = /^(?:[A-Za-z0-9.:*?_\[\]-]+|[0-9.]+\/\d{1,2}|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\/\d{1,3})$/;

const url = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

export const configSchema = z.object({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.coerce.number().int().min(0).max(65535).default(18888),
  dataDir: z.string().min(1),
  /**
   * `postgres://user:password@host:port/database`: every table in that PostgreSQL database, and
   * several servers (replicas) may share it. Unset: the embedded SQLite in the data directory.
   */
  databaseUrl: z.url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// URL, e.g. postgres://sandboxd@127.0.0.1:5432/sandboxd' }).optional(),
  tls: z.boolean().default(false),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  apiKeys: z.array(z.string().min(8, 'an API key must be at least 8 characters')).default([]),
  apiKeyFile: z.string().min(1).optional(),
  allowSudoExec: z.boolean().default(false),
  maxSandboxes: z.coerce.number().int().min(0).default(0),
  /** Which backend runs sandboxes; its own options (e.g. pidsLimit) are read by its registry entry. */
  backend: z.enum(BACKEND_IDS).default('docker'),
  defaultImage: z.string().min(1).default(DEFAULT_IMAGE),
  pidsLimit: z.coerce.number().int().min(16).max(1_000_000).default(512),
  /**
   * Hosts, addresses and CIDR ranges a source_url may reach although they are not public
   * (loopback, private, link-local...): a TOML list, or a comma-separated list.
   */
  sourceAllowedHosts: z
    .union([z.array(z.string()), z.string()])
    .transform((input, ctx) => {
      const entries = (Array.isArray(input) ? input : input.split(',')).map((entry) => entry.trim()).filter(Boolean);
      const bad = entries.find((entry) => !SOURCE_HOST_ENTRY.test(entry));
      if (bad) {
        ctx.addIssue({ code: 'custom', message: `'${bad}' is not a host name, an address or a CIDR range: use git.internal,10.0.0.0/8,fd00::/8` });
        return z.NEVER;
      }
      return entries;
    })
    .default([]),
  /**
   * sandboxd's Docker networks (`<name>`, `<name>-proxy`; bridges `<name>-o`, `<name>-p`) and
   * packet-filter chains (`<NAME>-EGRESS`, `<NAME>-RULES`) are named from it. Unset: the
   * deployment's own name, kept in the data directory (`sd` and ten digits of the deployment
   * id; `sandboxd` for a data directory made before deployment ids), so that servers sharing an
   * engine never share them.
   */
  networkName: z.string().regex(/^[a-z][a-z0-9]{0,11}$/, 'must be 1-12 lowercase letters and digits, starting with a letter (bridge interface names are at most 15 characters)').optional(),
  snapshotPrefix: z
    .string()
    .regex(/^[a-z0-9]+([._\/-][a-z0-9]+)*$/, 'must be an image repository name such as sandboxd-snapshot')
    .default('sandboxd-snapshot'),
  /** Most commands of one POST /batch/run that run at once. */
  batchConcurrency: z.coerce.number().int().min(1).max(64).default(4),
  /** program -> image entries laid over DEFAULT_IMAGE_DETECTION (TOML table, or `cmd=image,...`). */
  imageDetection: z
    .union([
      z.record(z.string().min(1), z.string().min(1)),
      z.string().transform((text, ctx) => {
        try {
          return parseImageDetection(text);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: `${(err as Error).message}: use python=my/python:tag,node=my/node:tag` });
          return z.NEVER;
        }
      }),
    ])
    .default({}),
  /** Image builds from a Dockerfile running at once; one more is refused (429 BUSY). */
  buildConcurrency: z.coerce.number().int().min(1).max(64).default(2),
  /** Most processes the steps of one image build may hold at once (a cgroup's pids.max). */
  buildPidsLimit: z.coerce.number().int().min(16).max(1_000_000).default(512),
  /** CPU weight of a build step against a sandbox's 1024 (cgroup cpu.shares). */
  buildCpuShares: z.coerce.number().int().min(2).max(262_144).default(512),
  /** MiB one step of an image build may write (its layer); a step past it stops the build. */
  buildStepDiskMb: z.coerce.number().int().min(1).max(1_048_576).default(1024),
  /** MiB all the steps of one image build may write together. */
  buildDiskMb: z.coerce.number().int().min(1).max(1_048_576).default(2048),
  /** Ready pool instances kept per (image, profile); 0 makes none ahead of demand. */
  poolSize: z.coerce.number().int().min(0).max(MAX_POOL_SIZE).default(2),
  /** Sizes of particular (image, profile) keys, warmed at start (TOML table, or `image[@profile]=n,...`). */
  poolSizes: z
    .union([z.record(z.string().min(1), z.unknown()), z.string()])
    .transform((input, ctx) => {
      try {
        return parsePoolSizes(input);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `${(err as Error).message}: use sandboxd/python:bookworm=2,sandboxd/base:bookworm@restrictive=1` });
        return z.NEVER;
      }
    })
    .default([]),
  /**
   * MiB of memory that warm instances may hold in all, each counted at what a waiting instance
   * costs (IDLE_INSTANCE_MB, 16): pools grow past their configured sizes with demand only up to
   * it. Default: 512 instances.
   */
  poolMemoryMb: z.coerce.number().int().min(0).max(16_777_216).default(8192),
  /** Seconds between background runs of gc and of lifecycle reconciliation; 0 disables. */
  gcInterval: z.coerce.number().int().min(0).default(60),
  reconcileInterval: z.coerce.number().int().min(0).default(60),
  events: z.boolean().default(false),
  webhookUrls: z.array(url).default([]),
  webhookSecret: z.string().min(16, 'a webhook secret must be at least 16 characters').optional(),
  eventsBacklog: z.coerce.number().int().min(1).max(1_000_000).default(1000),
  eventsHeartbeat: z.coerce.number().positive().max(3600).default(15),
  otelEndpoint: url.optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** auto: readable lines when stderr is a terminal, JSON otherwise. */
  logFormat: z.enum(['auto', 'pretty', 'json']).default('auto'),
  /** Durable-object calls running at once, over all objects. */
  objectConcurrency: z.coerce.number().int().min(1).max(1024).default(16),
  /** Storage limit (bytes of JSON) of an object whose class sets none. */
  objectMaxStorage: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(4 * 1024 * 1024),
  /** Orchestration activities running at once, over all instances. */
  orchestrationConcurrency: z.coerce.number().int().min(1).max(1024).default(16),
  /** How long finished orchestration instances are kept: a duration (<int><s|m|h|d>). */
  orchestrationRetention: z
    .string()
    .regex(/^[1-9][0-9]{0,8}[smhd]$/, 'must be a duration like 30d, 12h, 90m')
    .default('30d'),
  /**
   * Steps one orchestration instance may run (every step, container and map item counts): a start
   * that would surely pass it is a 400, an instance that passes it fails naming it.
   */
  orchestrationMaxSteps: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  /** History events one orchestration instance may keep; the instance fails `history limit reached` at it. */
  orchestrationMaxHistoryEvents: z.coerce.number().int().min(10).max(100_000).default(10_000),
  /** Bytes of JSON the outputs of one orchestration instance's steps may hold in all (one output is cut at 1 MiB). */
  orchestrationMaxOutputBytes: z.coerce.number().int().min(1024 * 1024).max(256 * 1024 * 1024).default(8 * 1024 * 1024),
  /** Child processes that run the SQL of host sqlite stores (a runaway statement is killed with its process). */
  storeWorkers: z.coerce.number().int().min(1).max(64).default(2),
  /** Default timeout_ms of store query, execute and command; a request may ask for up to 60000. */
  storeTimeout: z.coerce.number().int().min(1).max(60_000).default(10_000),
  /**
   * Globs (`*`, `?`) of the hosts postgres, mysql and redis stores may connect to, and CIDRs: a
   * TOML list, or a comma-separated list. Default `*` (any public host); an internal address
   * (loopback, link-local, private, this host's) only when an entry names it without a wildcard
   * (the host, its address or a CIDR holding it). `[]` or '' allows none but a bound sandbox's address.
   */
  storeAllowedHosts: z
    .union([z.array(z.string()), z.string()])
    .transform((input, ctx) => {
      const entries = (Array.isArray(input) ? input : input.split(',')).map((entry) => entry.trim()).filter(Boolean);
      const bad = entries.find((entry) => !STORE_HOST_GLOB.test(entry));
      if (bad) {
        ctx.addIssue({ code: 'custom', message: `'${bad}' is not a host glob or CIDR: use db.internal,*.example.com,10.0.0.*,10.0.0.0/8` });
        return z.NEVER;
      }
      return entries;
    })
    .default(['*']),
  /**
   * The 32-byte key that encrypts secrets at rest, made absolute; absent: `<data-dir>/secret.key`,
   * made on first use. Kept apart from the data directory, a backup of that directory holds no key.
   */
  secretKeyFile: z.string().min(1, 'must name a key file').optional(),
  /** Listen on the proxy port (the LLM gateway) at the backend's gateway address. */
  proxy: z.boolean().default(false),
  /** 0 takes any free port (sandboxes are told the port bound, at each command). */
  proxyPort: z.coerce.number().int().min(0).max(65535).default(18889),
  /**
   * A PEM file of CA certificates the egress proxy trusts for upstreams besides the public
   * roots, where it terminates TLS toward a secret's host (made absolute); absent: the public roots only.
   */
  proxyUpstreamCaFile: z.string().min(1, 'must name a PEM file').optional(),
  /** Preview URLs' host form is `<port>-<name>.<previewDomain>` on the API's port. */
  previewDomain: z
    .string()
    .transform((value) => value.toLowerCase().replace(/^\.+|\.+$/g, ''))
    .pipe(z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'must be a domain name such as sandbox.localhost or preview.example.com'))
    .default('sandbox.localhost'),
  /**
   * `[llm.providers.<name>]` tables `{base_url, auth_header, auth_scheme}`: overrides of the
   * built-in providers (openai, anthropic, google) or OpenAI-compatible ones; the env twin is JSON.
   */
  llmProviders: z
    .unknown()
    .transform((input, ctx) => {
      if (typeof input !== 'string') return input;
      try {
        return JSON.parse(input) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON such as {"groq": {"base_url": "https://api.groq.com/openai/v1"}}' });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.string(), z.strictObject({ base_url: url.optional(), auth_header: z.string().optional(), auth_scheme: z.string().optional() })))
    .default({}),
  /** Add stream_options.include_usage to OpenAI Chat streams that lack it, so that their tokens are counted. */
  llmStreamUsage: z.boolean().default(true),
  /** Policy rules (TOML or JSON by extension), made absolute; none: every request is allowed. */
  policyFile: z.string().min(1, 'must name a rule file').optional(),
  /** enforce: denials are answered 403; audit: they are logged and let through. Overrides the rule file's `mode`. */
  policyMode: z.enum(['enforce', 'audit'], { error: 'must be enforce or audit' }).optional(),
  /** Whether allowed requests are written to the policy audit ring too (denials always are). */
  policyAuditAllows: z.boolean().default(false),
});

/** One `[[api.keys]]` table: a named principal and its key, given as is or by an environment variable. */
export const namedKeySchema = z
  .object({
    name: z.string({ error: 'must be a string' }).regex(PRINCIPAL_NAME_PATTERN, 'must match ^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,62}$'),
    key: z.string().min(8, 'an API key must be at least 8 characters').optional(),
    key_env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name').optional(),
    admin: z.boolean({ error: 'must be true or false' }).default(false),
    labels: z.record(z.string(), z.string({ error: 'label values must be strings' })).default({}),
  })
  .strict()
  .refine((k) => (k.key === undefined) !== (k.key_env === undefined), { message: 'give exactly one of key and key_env' });

export type Config = z.infer<typeof configSchema> & {
  /** The keys named in `[[api.keys]]`, their key_env read; unnamed keys stay in apiKeys. */
  namedKeys: ApiKey[];
};

/**
 * The options of one or more sections of the parsed config, as the schema made them (every
 * default applied): what a service is handed. Services read it and never default it again
 * (test/unit/config-sections.test.ts checks that no service does).
 */
export type ConfigSection<S extends SectionName> = Readonly<Pick<Config, OptionsIn<S>>>;

/** The config with every default of the schema: what a server with no TOML, env or flags runs with. */
export function defaultConfig(overrides: Partial<Record<OptionName, unknown>> & { dataDir: string }): Config {
  return { ...configSchema.parse(overrides), namedKeys: [] };
}
