import { Counter, Gauge, Histogram } from 'prom-client';
import { serveCommand } from '../../src/cli/serve-command.js';
import { CLI_NEXT_STEPS } from '../../src/cli/client/output.js';
import { configSchema, OPTIONS, TOML_ONLY, type OptionName } from '../../src/config/config-schema.js';
import { ServiceError, STATUS_BY_CODE, withNextStep, type ErrorCode, type NextStep, type NextStepAction } from '../../src/errors.js';
import { httpMessage } from '../../src/http/errors.js';
import { toolError } from '../../src/mcp/tool-errors.js';
import { toolProfiles } from '../../src/mcp/tool-sets.js';
import { domainTools, domainToolSets } from '../../src/services/domains.js';
import { Metrics } from '../../src/telemetry/metrics.js';
import { cell, table } from './markers.js';

/**
 * The tables that exist in code, rendered as Markdown: options, MCP tools, error codes and
 * next steps, metrics. Each reads the program's own data through its entry point, so that a
 * new option, tool, code or series shows up in the docs at the next `npm run docs`.
 */

/** Defaults that depend on the machine or on another setting, said in words. */
const DEFAULT_IN_WORDS: Partial<Record<OptionName, string>> = {
  dataDir: '/var/lib/sandboxd (root) or `$XDG_DATA_HOME/sandboxd`',
  secretKeyFile: '`<data-dir>/secret.key`, made on first use',
  policyMode: "the rule file's `mode`, else enforce",
  policyFile: 'none (every request allowed)',
};

/**
 * What the options that `sandboxd serve` has no flag for mean (the others say it in
 * `sandboxd serve --help`). `--network-name` is declared in OPTIONS but serve does not accept it.
 */
const MEANING_WITHOUT_FLAG: Partial<Record<OptionName, string>> = {
  networkName:
    "names sandboxd's Docker networks (`<name>`, `<name>-proxy`; bridges `<name>-o`, `<name>-p`) and packet-filter chains (`<NAME>-EGRESS`, `<NAME>-RULES`); 1-12 lowercase letters and digits; servers sharing a host need different names",
  llmProviders:
    '`base_url`, `auth_header`, `auth_scheme` of a provider: overrides of `openai`, `anthropic`, `google`, or an OpenAI-compatible provider of your own (groq, a local vLLM); the environment twin is JSON',
  llmStreamUsage:
    'ask OpenAI Chat streams that do not ask for their usage for it (`stream_options.include_usage`), so that their tokens are counted',
};

/** A flag description without the twins and the default it repeats (both have columns). */
const meaningOf = (description: string): string =>
  description.replace(/\s*\((?:SERVICE_[A-Z_]+|\[[a-z_.]+\](?:\.[a-z_]+)?|default [^)]*|\d+)\)/g, '').trim();

function defaultText(name: OptionName, value: unknown): string {
  const words = DEFAULT_IN_WORDS[name];
  if (words) return words;
  if (value === undefined) return 'none';
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.map((v) => `\`${String(v)}\``).join(', ');
  if (typeof value === 'object' && value !== null) return Object.keys(value).length === 0 ? 'none' : `\`${JSON.stringify(value)}\``;
  return `\`${String(value)}\``;
}

/** `server.port` as `[server].port`. */
const tomlKey = (key: string): string => {
  const dot = key.indexOf('.');
  return `[${key.slice(0, dot)}].${key.slice(dot + 1)}`;
};

/** Every option: flag, environment twin, TOML key, default, meaning. */
export function optionsTable(): string {
  const flags = new Map(serveCommand().options.map((option) => [option.long, option.description]));
  const defaults = configSchema.parse({ dataDir: '/' }) as Record<string, unknown>;
  const rows = (Object.entries(OPTIONS) as [OptionName, (typeof OPTIONS)[OptionName]][]).map(([name, option]) => {
    const hasFlag = flags.has(option.flag);
    const description = flags.get(option.flag) ?? MEANING_WITHOUT_FLAG[name];
    if (description === undefined) throw new Error(`option ${name}: sandboxd serve has no flag ${option.flag}, and MEANING_WITHOUT_FLAG says nothing of it`);
    const repeatable = /repeatable/.test(description);
    const toml = name === 'llmProviders' ? '`[llm.providers.<name>]` tables' : `\`${tomlKey(option.toml)}\``;
    return [
      hasFlag ? `\`${option.flag}\`${repeatable ? ' (repeatable)' : ''}` : '(none)',
      `\`${option.env}\``,
      toml,
      cell(defaultText(name, defaults[name])),
      cell(meaningOf(description).replace(/;?\s*repeatable/, '')),
    ];
  });
  rows.push(['(none)', '', `\`[[${TOML_ONLY.namedKeys}]]\` tables: \`name\`, \`key\` or \`key_env\`, \`admin\`, \`labels\``, '', 'named principals (see [policy](policy.md))']);
  return table(['flag', 'environment', 'TOML', 'default', 'meaning'], rows);
}

/** Every MCP tool: name, the profiles besides `full` that hold it, arguments (required in bold), the backend capability it needs, description. */
export function toolsTable(): string {
  const tools = domainTools();
  const profiles = Object.entries(toolProfiles(tools, domainToolSets())).filter(([name]) => name !== 'full');
  const rows = tools.map((tool) => {
    const args = Object.entries(tool.inputSchema.shape).map(([arg, schema]) =>
      (schema as { safeParse(v: unknown): { success: boolean } }).safeParse(undefined).success ? arg : `**${arg}**`,
    );
    const sets = profiles.filter(([, names]) => names.includes(tool.name)).map(([name]) => `\`${name}\``);
    return [`\`${tool.name}\``, sets.join(', '), args.join(', '), tool.capability ? `\`${tool.capability}\`` : '', cell(tool.description)];
  });
  return table(['tool', 'profiles', 'arguments (required in bold)', 'needs', 'what it does and returns'], rows);
}

/** What each code means; the compiler asks for a line for every code of the table. */
const CODE_MEANING: Record<ErrorCode, string> = {
  BAD_REQUEST: 'the request is invalid; the message names the field',
  UNAUTHORIZED: 'no key, or a key the server does not accept',
  FORBIDDEN: 'not allowed: sudo off, an admin-only route for a non-admin key, permission denied inside the sandbox, a read-only store',
  NOT_FOUND: 'no such sandbox, snapshot, object, store, route, ...',
  CONFLICT: 'a taken name, or the resource is in the wrong state (a stopped sandbox, an archived one, a finished orchestration)',
  PAYLOAD_TOO_LARGE: 'a body, file, storage or result past its limit, or a full file system',
  UNSUPPORTED: "the backend lacks the feature (its capabilities are listed by GET /status) or the profile excludes it",
  IMAGE_UNAVAILABLE: 'the image is absent and cannot be pulled; the message says how to build it',
  SOURCE_UNAVAILABLE: 'a source_url that could not be cloned, for any reason (the server log says why)',
  METHOD_FAILED: "a durable object's method threw; `details` says what it threw",
  IDEMPOTENCY_KEY_REUSED: 'an Idempotency-Key sent again with another method or body than the call it was first used for (the message names the key)',
  LIMIT_REACHED: 'a count limit: --max-sandboxes, the most schedules, the workers of a sandbox',
  BUSY: 'the resource is serving other calls (an object\'s queue, a store\'s connections, streamed file reads, watches); try again shortly',
  POLICY_DENIED: 'a policy rule refused the request; the message names the rule',
  READ_ONLY: 'a statement that writes, sent where only reads are allowed',
  SQL_ERROR: "the store's engine refused the statement; `details.engine_code` carries the engine's code",
  INTERNAL: 'a fault of the server; the details are in its log only',
  BACKEND_UNAVAILABLE: 'the engine (Docker) cannot be reached, the packet filter is missing, or the server is shutting down',
  EVENTS_DISABLED: 'GET /events on a server without the event bus; the message says how to turn it on',
  STORE_UNAVAILABLE: 'an external store cannot be reached or refused the credentials',
  BAD_GATEWAY: 'a forwarded request found nothing listening on the port',
  TIMEOUT: 'the operation did not finish within its time limit',
};

/** One example of each next step, with the code of the errors that carry it. */
const NEXT_STEP_EXAMPLES: { [A in NextStepAction]: { code: ErrorCode; message: string; step: Extract<NextStep, { action: A }> } } = {
  start: { code: 'CONFLICT', message: "sandbox 'x' is stopped", step: { action: 'start', sandbox: 'x' } },
  recover: { code: 'CONFLICT', message: "sandbox 'x' is archived", step: { action: 'recover', sandbox: 'x', then: 'start' } },
  browser_open: { code: 'NOT_FOUND', message: "page 'p' is not open in sandbox 'x'", step: { action: 'browser_open', sandbox: 'x', page: 'p' } },
  browser_snapshot: { code: 'BAD_REQUEST', message: "ref 'e9' is not in the latest snapshot of page 'p'", step: { action: 'browser_snapshot', sandbox: 'x', page: 'p', use_refs: true } },
  list_directory: { code: 'BAD_REQUEST', message: "'/workspace/src' is a directory", step: { action: 'list_directory', sandbox: 'x', path: '/workspace/src' } },
  list_images: { code: 'NOT_FOUND', message: "image 'nc-img' not found", step: { action: 'list_images' } },
  create_volume: { code: 'NOT_FOUND', message: "volumes[0].name: volume 'data' not found", step: { action: 'create_volume', volume: 'data' } },
  store_execute: { code: 'READ_ONLY', message: 'query: statement writes', step: { action: 'store_execute', store: 'db' } },
  store_ops: { code: 'UNSUPPORTED', message: "query: store 'cache' is a redis store", step: { action: 'store_ops', store: 'cache', ops: ['command'] } },
  register_class: { code: 'NOT_FOUND', message: "class 'Counter' is not registered", step: { action: 'register_class', class: 'Counter' } },
  delete_proxy_hook: { code: 'CONFLICT', message: "proxy hook 'audit' already exists", step: { action: 'delete_proxy_hook', hook: 'audit' } },
  set_llm_key: { code: 'BAD_REQUEST', message: 'base_url: must not carry credentials', step: { action: 'set_llm_key' } },
  mint_terminal_token: { code: 'UNAUTHORIZED', message: 'invalid terminal token: it is unknown or was used already', step: { action: 'mint_terminal_token', sandbox: 'x' } },
};

/** Every error code with its HTTP status, and the next steps its errors may carry. */
export function errorCodesTable(): string {
  const steps = Object.entries(NEXT_STEP_EXAMPLES);
  const rows = (Object.entries(STATUS_BY_CODE) as [ErrorCode, number][]).map(([code, status]) => [
    `\`${code}\``,
    String(status),
    cell(CODE_MEANING[code]),
    steps.filter(([, example]) => example.code === code).map(([action]) => `\`${action}\``).join(', '),
  ]);
  return table(['code', 'HTTP status', 'meaning', 'next steps'], rows);
}

/** Every next step as each face says it: the HTTP route, the MCP tool, the command line. */
export function nextStepsTable(): string {
  const rows = (Object.entries(NEXT_STEP_EXAMPLES) as [NextStepAction, (typeof NEXT_STEP_EXAMPLES)[NextStepAction]][]).map(([action, example]) => {
    const error = new ServiceError(example.code, example.message, { hint: example.step });
    const mcp = toolError(error).content[0];
    return [
      `\`${action}\``,
      `\`${example.code}\``,
      `\`${JSON.stringify(example.step)}\``,
      cell(httpMessage(error)),
      cell(mcp?.type === 'text' ? mcp.text : ''),
      cell(withNextStep(example.message, example.step, CLI_NEXT_STEPS)),
    ];
  });
  return table(['action', 'carried by', 'hint (HTTP envelope)', 'HTTP message', 'MCP message', 'CLI message'], rows);
}

/** Every Prometheus series: name, type, labels, help. */
export function metricsTable(): string {
  const metrics = new Metrics(
    { activeSandboxes: async () => 0, warmPoolSize: () => 0, eventClients: () => 0, webhookQueue: () => ({ queued: 0, inFlight: 0 }), activeObjects: async () => 0 },
    { version: 'docs', backend: 'docs' },
  );
  const typeOf = (metric: unknown) => (metric instanceof Counter ? 'counter' : metric instanceof Gauge ? 'gauge' : metric instanceof Histogram ? 'histogram' : 'summary');
  // prom-client's metric classes keep their name, help and label names as plain fields.
  const rows = metrics.registry
    .getMetricsAsArray()
    .map((metric) => ({ metric, ...(metric as unknown as { name: string; help: string; labelNames?: string[] }) }))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map(({ metric, name, help, labelNames = [] }) => [`\`${name}\``, typeOf(metric), labelNames.map((label) => `\`${label}\``).join(', '), cell(help)]);
  return table(['series', 'type', 'labels', 'help'], rows);
}
