import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import type { ApiKey } from '../domain/principals.js';
import { configSchema, namedKeySchema, OPTIONS, TOML_ONLY, type Config, type OptionName } from './config-schema.js';

/** A configuration the server cannot start with; the message says what to fix. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface ConfigSources {
  /** Path of a TOML file (`--config`). */
  configFile?: string;
  env?: NodeJS.ProcessEnv;
  /** Start flags already parsed, keyed by option name. */
  flags?: Partial<Record<OptionName, unknown>>;
}

const BOOLEAN_OPTIONS = new Set<OptionName>(['tls', 'allowSudoExec', 'events', 'proxy', 'llmStreamUsage', 'policyAuditAllows']);
const LIST_OPTIONS = new Set<OptionName>(['apiKeys', 'webhookUrls']);

/** Default data directory: /var/lib/sandboxd for root, else under XDG_DATA_HOME. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  if (process.getuid?.() === 0) return '/var/lib/sandboxd';
  return join(env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'sandboxd');
}

/**
 * Merges defaults < TOML file < environment (SANDBOXD_*, else SERVICE_*) < flags into one validated Config.
 * API keys are the union of every source (any one authenticates), plus the keys in the
 * key file. Throws ConfigError naming the offending source and what to fix.
 */
export function loadConfig(sources: ConfigSources = {}): Config {
  const env = sources.env ?? process.env;
  const merged: Partial<Record<OptionName, unknown>> = {};
  const origin: Partial<Record<OptionName, string>> = {};
  const apiKeys: string[] = [];

  const apply = (layer: Partial<Record<OptionName, unknown>>, describe: (name: OptionName) => string) => {
    for (const [name, value] of Object.entries(layer) as [OptionName, unknown][]) {
      if (value === undefined) continue;
      if (name === 'apiKeys') {
        apiKeys.push(...(value as string[]));
        origin.apiKeys = describe(name);
        continue;
      }
      merged[name] = value;
      origin[name] = describe(name);
    }
  };

  let namedKeys: ApiKey[] = [];
  if (sources.configFile) {
    const toml = readTomlLayer(sources.configFile);
    apply(toml.layer, (n) => `[${OPTIONS[n].toml.replace('.', '].')} in ${sources.configFile}`);
    namedKeys = readNamedKeys(toml.namedKeys, sources.configFile, env);
  }
  apply(readEnvLayer(env), (n) => envSource(OPTIONS[n], env));
  apply(sources.flags ?? {}, (n) => OPTIONS[n].flag);

  const keyFile = merged.apiKeyFile;
  if (typeof keyFile === 'string') apiKeys.push(...readKeyFile(keyFile));
  merged.apiKeys = [...new Set(apiKeys.map((k) => k.trim()).filter(Boolean))];
  merged.dataDir = resolve(String(merged.dataDir ?? defaultDataDir(env)));
  if (typeof merged.secretKeyFile === 'string' && merged.secretKeyFile !== '') merged.secretKeyFile = resolve(merged.secretKeyFile);
  if (typeof merged.proxyUpstreamCaFile === 'string' && merged.proxyUpstreamCaFile !== '') merged.proxyUpstreamCaFile = resolve(merged.proxyUpstreamCaFile);
  if (typeof merged.policyFile === 'string' && merged.policyFile !== '') merged.policyFile = resolve(merged.policyFile);

  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const name = issue.path[0] as OptionName;
      return `${origin[name] ?? OPTIONS[name]?.flag ?? String(name)}: ${issue.message}`;
    });
    throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const config: Config = { ...parsed.data, namedKeys };
  if (Boolean(config.tlsCert) !== Boolean(config.tlsKey)) {
    throw new ConfigError('invalid configuration: --tls-cert and --tls-key must be given together');
  }
  if (config.tlsCert) config.tls = true;
  return config;
}

function readTomlLayer(path: string): { layer: Partial<Record<OptionName, unknown>>; namedKeys: unknown } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid TOML: ${(err as Error).message}`);
  }
  const byKey = new Map<string, OptionName>(Object.entries(OPTIONS).map(([name, o]) => [o.toml, name as OptionName]));
  const layer: Partial<Record<OptionName, unknown>> = {};
  let namedKeys: unknown = [];
  for (const [section, table] of Object.entries(doc)) {
    if (typeof table !== 'object' || table === null || Array.isArray(table)) {
      throw new ConfigError(`config file ${path}: '${section}' must be a table such as [api]`);
    }
    for (const [key, value] of Object.entries(table)) {
      if (`${section}.${key}` === TOML_ONLY.namedKeys) {
        namedKeys = value;
        continue;
      }
      const name = byKey.get(`${section}.${key}`);
      if (!name) throw new ConfigError(`config file ${path}: unknown key [${section}].${key}`);
      layer[name] = LIST_OPTIONS.has(name) && !Array.isArray(value) ? [value] : value;
    }
  }
  return { layer, namedKeys };
}

/**
 * The `[[api.keys]]` tables: each checked, its key_env read from the environment. Names and keys
 * are unique, so that a principal is one key and a key one principal.
 */
function readNamedKeys(tables: unknown, path: string, env: NodeJS.ProcessEnv): ApiKey[] {
  if (!Array.isArray(tables)) throw new ConfigError(`config file ${path}: api.keys must be an array of tables: [[api.keys]]`);
  const keys: ApiKey[] = [];
  tables.forEach((table, index) => {
    const where = `[[api.keys]] #${index + 1} in ${path}`;
    const parsed = namedKeySchema.safeParse(table);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'entry'}: ${issue.message}`);
      throw new ConfigError(`invalid configuration: ${where}: ${problems.join('; ')}`);
    }
    const { name, key_env: keyEnv, admin, labels } = parsed.data;
    const key = parsed.data.key ?? (keyEnv === undefined ? undefined : env[keyEnv]?.trim());
    if (!key) throw new ConfigError(`invalid configuration: ${where}: key_env: environment variable ${keyEnv} is not set`);
    if (key.length < 8) throw new ConfigError(`invalid configuration: ${where}: key_env: the key in ${keyEnv} must be at least 8 characters`);
    if (keys.some((k) => k.name === name)) throw new ConfigError(`invalid configuration: ${where}: name: '${name}' is used by another key`);
    if (keys.some((k) => k.key === key)) throw new ConfigError(`invalid configuration: ${where}: key: the same key is given to another name`);
    keys.push({ name, key, admin, labels });
  });
  return keys;
}

/**
 * The environment variable an option is read from: its `SANDBOXD_*` name where that is set (it
 * collides with no other tool's), else the specification's `SERVICE_*` name.
 */
export function envSource(option: { env: string }, env: NodeJS.ProcessEnv): string {
  const own = option.env.replace(/^SERVICE_/, 'SANDBOXD_');
  return env[own] !== undefined && env[own] !== '' ? own : option.env;
}

function readEnvLayer(env: NodeJS.ProcessEnv): Partial<Record<OptionName, unknown>> {
  const layer: Partial<Record<OptionName, unknown>> = {};
  for (const [name, option] of Object.entries(OPTIONS) as [OptionName, (typeof OPTIONS)[OptionName]][]) {
    const source = envSource(option, env);
    const raw = env[source];
    if (raw === undefined || raw === '') continue;
    if (BOOLEAN_OPTIONS.has(name)) layer[name] = parseBoolean(raw, source);
    else if (name === 'webhookUrls') layer[name] = raw.split(',').map((s) => s.trim()).filter(Boolean);
    else if (LIST_OPTIONS.has(name)) layer[name] = [raw];
    else layer[name] = raw;
  }
  return layer;
}

function parseBoolean(raw: string, source: string): boolean {
  const value = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(value)) return true;
  if (['0', 'false', 'no', 'off'].includes(value)) return false;
  throw new ConfigError(`invalid configuration: ${source}: '${raw}' is not a boolean (use true or false)`);
}

/** Keys one per line; blank lines and lines starting with # are ignored. */
function readKeyFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read API key file ${path}: ${(err as Error).message}`);
  }
  const keys = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  if (keys.length === 0) throw new ConfigError(`API key file ${path} holds no key (one key per line)`);
  return keys;
}
