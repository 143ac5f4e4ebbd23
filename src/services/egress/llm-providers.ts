import { badRequest, present } from '../../errors.js';

/** How the upstream wants its key: in which header, with which scheme before it ("" for none). */
export interface ProviderAuth {
  /** Lower-case header name: authorization, x-api-key, x-goog-api-key, ... */
  header: string;
  /** "Bearer" puts `Bearer <key>` in the header; "" the key alone. */
  scheme: string;
}

/** The answer and usage format a provider speaks. */
export type ProviderFormat = 'openai' | 'anthropic' | 'google';

/** One upstream the gateway forwards `/llm/<name>/...` to. */
export interface LlmProvider {
  name: string;
  /** Where `/llm/<name>/<rest>` goes: `<base_url>/<rest>`. */
  baseUrl: string;
  auth: ProviderAuth;
  format: ProviderFormat;
  /**
   * Environment variables a sandbox gets: the base-URL variable (its value is the gateway's
   * `/llm/<name>` plus `baseUrlSuffix`) and the key variables, which hold the sandbox's token.
   */
  env: { baseUrl: string[]; baseUrlSuffix: string; keys: string[] };
  /** Whether the provider is one sandboxd knows, rather than one the configuration adds. */
  builtin: boolean;
}

/** A provider of `[llm.providers.<name>]`: an override of a built-in one, or an OpenAI-compatible upstream. */
export interface ProviderSettings {
  base_url?: string | undefined;
  auth_header?: string | undefined;
  auth_scheme?: string | undefined;
}

/** Provider names: what `/llm/<name>/` and the keys API take. */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** Other names clients use for the built-in providers. */
export const PROVIDER_ALIASES: Readonly<Record<string, string>> = { gemini: 'google', claude: 'anthropic' };

const BUILTIN: readonly LlmProvider[] = [
  {
    name: 'openai',
    baseUrl: 'https://api.openai.com',
    auth: { header: 'authorization', scheme: 'Bearer' },
    format: 'openai',
    // The SDKs expect the base URL to end in /v1.
    env: { baseUrl: ['OPENAI_BASE_URL'], baseUrlSuffix: '/v1', keys: ['OPENAI_API_KEY'] },
    builtin: true,
  },
  {
    name: 'anthropic',
    baseUrl: 'https://api.anthropic.com',
    auth: { header: 'x-api-key', scheme: '' },
    format: 'anthropic',
    env: { baseUrl: ['ANTHROPIC_BASE_URL'], baseUrlSuffix: '', keys: ['ANTHROPIC_API_KEY'] },
    builtin: true,
  },
  {
    name: 'google',
    baseUrl: 'https://generativelanguage.googleapis.com',
    auth: { header: 'x-goog-api-key', scheme: '' },
    format: 'google',
    env: { baseUrl: ['GOOGLE_GEMINI_BASE_URL', 'GEMINI_BASE_URL'], baseUrlSuffix: '', keys: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'] },
    builtin: true,
  },
];

/**
 * The providers of one server: the built-in ones with their configured overrides, then the
 * configured OpenAI-compatible ones (say groq, a local vLLM), which need a base_url. Throws
 * BAD_REQUEST naming the setting that is wrong.
 */
export function providersFrom(settings: Readonly<Record<string, ProviderSettings>> = {}): Map<string, LlmProvider> {
  const providers = new Map(BUILTIN.map((p) => [p.name, { ...p, env: { ...p.env } }]));
  for (const [given, s] of Object.entries(settings)) {
    const name = PROVIDER_ALIASES[given] ?? given;
    const where = `[llm.providers.${given}]`;
    if (!PROVIDER_NAME.test(name)) throw badRequest(`${where}: the provider name must match ${PROVIDER_NAME.source}`);
    const known = providers.get(name);
    const baseUrl = s.base_url ? checkBaseUrl(s.base_url, `${where}.base_url`) : known?.baseUrl;
    if (!baseUrl) throw badRequest(`${where}.base_url: required for a provider sandboxd does not know (an OpenAI-compatible API)`);
    const header = s.auth_header?.toLowerCase() ?? known?.auth.header ?? 'authorization';
    if (!/^[a-z0-9-]{1,64}$/.test(header)) throw badRequest(`${where}.auth_header: must be a header name such as authorization or x-api-key`);
    const scheme = s.auth_scheme ?? known?.auth.scheme ?? 'Bearer';
    if (!/^[A-Za-z0-9_-]{0,32}$/.test(scheme)) throw badRequest(`${where}.auth_scheme: must be a word such as Bearer, or "" for the key alone`);
    const variable = name.toUpperCase().replace(/-/g, '_');
    providers.set(name, {
      name,
      baseUrl,
      auth: { header, scheme },
      format: known?.format ?? 'openai',
      env: known?.env ?? { baseUrl: [`${variable}_BASE_URL`], baseUrlSuffix: '', keys: [`${variable}_API_KEY`] },
      builtin: known?.builtin ?? false,
    });
  }
  return providers;
}

/** An OpenAI-compatible provider added by the keys API with a base_url. */
export function compatibleProvider(name: string, baseUrl: string): LlmProvider {
  return present(providersFrom({ [name]: { base_url: baseUrl } }).get(name), `LLM provider '${name}'`);
}

/** A base URL without its trailing slash; BAD_REQUEST naming `field` for anything but http(s) without query or credentials. */
export function checkBaseUrl(value: string, field: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(`${field}: '${value}' is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw badRequest(`${field}: must be an http or https URL`);
  if (url.username || url.password) throw badRequest(`${field}: must not carry credentials`, { hint: { action: 'set_llm_key' } });
  if (url.search || url.hash) throw badRequest(`${field}: must not have a query or a fragment`);
  return url.href.replace(/\/+$/, '');
}
