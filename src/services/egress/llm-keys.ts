import { badRequest, notFound, present } from '../../errors.js';
import type { LlmKeyRecord, LlmRepository } from '../../state/llm-repository.js';
import { isoNow, type Clock } from '../support/clock.js';
import type { SecretBox } from '../support/secret-box.js';
import { checkBaseUrl, compatibleProvider, PROVIDER_ALIASES, PROVIDER_NAME, type LlmProvider } from './llm-providers.js';

/** A provider's key as every face shows it: never the key. */
export interface LlmKeyView {
  provider: string;
  /** The host the key is sent to. */
  domain: string;
  configured: boolean;
  source: 'stored' | 'env' | null;
  /** The last four characters of a stored key; null otherwise. */
  last4: string | null;
  base_url: string;
  updated_at: string | null;
}

/** PUT /llm/keys/{provider}: exactly one of value, env, vault_key_name. */
export interface PutKeyInput {
  value?: string | undefined;
  env?: string | undefined;
  vault_key_name?: string | undefined;
  base_url?: string | undefined;
}

/** A provider ready to forward to: where, and with which key. */
export interface ResolvedProvider {
  provider: LlmProvider;
  /** The real key; undefined when none is configured. */
  key: string | undefined;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const aad = (provider: string) => `llm-key:${provider}`;

/**
 * Provider keys of the LLM gateway: kept sealed with the SecretBox (or as the name of a server
 * environment variable), never shown again, read by the gateway on every request. The stored
 * rows are cached in memory (one process writes them) and the cache is replaced at each write.
 */
export class LlmKeys {
  private cache: Map<string, LlmKeyRecord> | undefined;

  constructor(
    private readonly input: {
      repo: LlmRepository;
      secrets: SecretBox;
      clock: Clock;
      /** Built-in and configured providers. */
      providers: ReadonlyMap<string, LlmProvider>;
      env?: NodeJS.ProcessEnv;
    },
  ) {}

  /** The provider a name or alias means; undefined for one neither known nor added with a base_url. */
  async provider(name: string): Promise<LlmProvider | undefined> {
    const canonical = PROVIDER_ALIASES[name] ?? name;
    const known = this.input.providers.get(canonical);
    const row = (await this.rows()).get(canonical);
    if (known) return row?.base_url ? { ...known, baseUrl: row.base_url } : known;
    return row?.base_url ? compatibleProvider(canonical, row.base_url) : undefined;
  }

  /** Every provider the gateway serves: the known ones, then those added with a base_url. */
  async providers(): Promise<LlmProvider[]> {
    const names = new Set([...this.input.providers.keys(), ...(await this.rows()).keys()]);
    const found = await Promise.all([...names].map((name) => this.provider(name)));
    return found.filter((p): p is LlmProvider => p !== undefined);
  }

  /** GET /llm/keys. */
  async list(): Promise<LlmKeyView[]> {
    const rows = await this.rows();
    return (await this.providers()).map((provider) => viewOf(provider, rows.get(provider.name), this.env));
  }

  /** PUT /llm/keys/{provider}: stores (or points at) the provider's key; BAD_REQUEST naming the field. */
  async put(name: string, input: PutKeyInput): Promise<LlmKeyView> {
    const provider = PROVIDER_ALIASES[name] ?? name;
    if (!PROVIDER_NAME.test(provider)) throw badRequest(`provider: '${name}' must match ${PROVIDER_NAME.source}`);
    const given = (['value', 'env', 'vault_key_name'] as const).filter((field) => input[field] !== undefined);
    if (given.length !== 1) {
      throw badRequest(given.length === 0 ? 'value: give the key as value, or the name of a server environment variable as env' : `${given.join(', ')}: give only one of value, env, vault_key_name`);
    }
    const baseUrl = input.base_url === undefined ? null : checkBaseUrl(input.base_url, 'base_url');
    if (!this.input.providers.has(provider) && baseUrl === null) {
      throw badRequest(`base_url: '${provider}' is not a provider sandboxd knows (openai, anthropic, google or one of [llm.providers]): give the base_url of its OpenAI-compatible API`);
    }
    let record: LlmKeyRecord;
    const updated_at = isoNow(this.input.clock);
    if (input.value !== undefined) {
      const value = input.value.trim();
      if (value === '' || /\s/.test(value)) throw badRequest('value: must be a key without spaces');
      record = { provider, secret: this.input.secrets.seal(value, aad(provider)), env: null, last4: value.slice(-4), base_url: baseUrl, updated_at };
    } else {
      const field = input.env !== undefined ? 'env' : 'vault_key_name';
      const variable = input.env ?? input.vault_key_name;
      if (variable === undefined || !ENV_NAME.test(variable)) throw badRequest(`${field}: must name an environment variable of the server ([A-Za-z_][A-Za-z0-9_]*)`);
      if (!this.env[variable]) throw badRequest(`${field}: the server has no environment variable ${variable}`);
      record = { provider, secret: null, env: variable, last4: null, base_url: baseUrl, updated_at };
    }
    await this.input.repo.putKey(record);
    this.cache = undefined;
    return viewOf(present(await this.provider(provider), `LLM provider '${provider}'`), record, this.env);
  }

  /** DELETE /llm/keys/{provider}; NOT_FOUND when it has no key. */
  async remove(name: string): Promise<{ removed: string }> {
    const provider = PROVIDER_ALIASES[name] ?? name;
    if (!(await this.input.repo.deleteKey(provider))) throw notFound(`LLM provider '${name}' has no key`);
    this.cache = undefined;
    return { removed: provider };
  }

  /** The provider and its real key, for the gateway; undefined for an unknown provider. */
  async resolve(name: string): Promise<ResolvedProvider | undefined> {
    const provider = await this.provider(name);
    if (!provider) return undefined;
    const row = (await this.rows()).get(provider.name);
    return { provider, key: row ? this.keyOf(row) : undefined };
  }

  private keyOf(row: LlmKeyRecord): string | undefined {
    if (row.secret !== null) return this.input.secrets.open(row.secret, aad(row.provider));
    return row.env ? this.env[row.env] || undefined : undefined;
  }

  private get env(): NodeJS.ProcessEnv {
    return this.input.env ?? process.env;
  }

  private async rows(): Promise<Map<string, LlmKeyRecord>> {
    this.cache ??= new Map((await this.input.repo.keys()).map((row) => [row.provider, row]));
    return this.cache;
  }
}

function viewOf(provider: LlmProvider, row: LlmKeyRecord | undefined, env: NodeJS.ProcessEnv): LlmKeyView {
  const source = row ? (row.secret !== null ? 'stored' : 'env') : null;
  return {
    provider: provider.name,
    domain: new URL(provider.baseUrl).host,
    configured: row !== undefined && (row.secret !== null || Boolean(row.env && env[row.env])),
    source,
    last4: row?.last4 ?? null,
    base_url: provider.baseUrl,
    updated_at: row?.updated_at ?? null,
  };
}
