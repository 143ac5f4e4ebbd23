import { EMBEDDED_STORE_KINDS, type StoreKind } from '../../../domain/store-kinds.js';
import { badRequest, ServiceError } from '../../../errors.js';

/**
 * Config fields the service owns (credentials and the read-only switch). Engines never see them:
 * `checkConfig` and `StoreTarget.config` get the rest, and the password reaches an engine only as
 * `StoreTarget.password`.
 */
export const SERVICE_FIELDS = ['password', 'password_env', 'read_only'] as const;

/** The password in a view: never the value, only that there is one. */
export const MASK = '****';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Longest password accepted; a longer value is a mistake, not a password. */
const MAX_PASSWORD_CHARS = 1024;

/** What a create's or patch's config says about credentials, beside the engine's own part. */
export interface Credentials {
  /** The engine's part of the config: no service field, and `url` without its password. */
  engine: Record<string, unknown>;
  /** A new password (from `config.password` or the url's userinfo); undefined when none is given. */
  password: string | undefined;
  /** `config.password: null` in a patch: forget the kept password. */
  clearPassword: boolean;
  passwordEnv: string | undefined;
  readOnly: boolean | undefined;
}

/**
 * Splits a request's config into the engine's part and the credentials, checking the service's
 * fields (BAD_REQUEST naming `config.<field>`). A url's password is moved out of the url, so that
 * the url can be kept in clear; a url whose password is the mask (a view sent back) gives none.
 */
export function splitCredentials(kind: StoreKind, config: Record<string, unknown>): Credentials {
  const { password, password_env: passwordEnv, read_only: readOnly, ...engine } = config;
  if (password !== undefined && password !== null && (typeof password !== 'string' || password.length === 0 || password.length > MAX_PASSWORD_CHARS)) {
    throw badRequest(`config.password: must be a string of 1 to ${MAX_PASSWORD_CHARS} characters`);
  }
  if (passwordEnv !== undefined && passwordEnv !== null && (typeof passwordEnv !== 'string' || !ENV_NAME.test(passwordEnv))) {
    throw badRequest('config.password_env: must name an environment variable of the server ([A-Za-z_][A-Za-z0-9_]*)');
  }
  if (readOnly !== undefined && readOnly !== null && typeof readOnly !== 'boolean') throw badRequest('config.read_only: must be true or false');
  let given = typeof password === 'string' ? password : undefined;
  if (typeof engine.url === 'string') {
    const split = splitUrl(engine.url);
    if (split.password !== undefined) {
      if (given !== undefined) throw badRequest('config.url: holds a password and config.password is given too; give the password once');
      given = split.password;
    }
    engine.url = split.url;
  }
  if ((given !== undefined || typeof passwordEnv === 'string') && EMBEDDED_STORE_KINDS.includes(kind)) {
    throw badRequest(`config.${given !== undefined ? 'password' : 'password_env'}: a ${kind} store lives on the host and has no password`);
  }
  if (given !== undefined && typeof passwordEnv === 'string') throw badRequest('config.password_env: give config.password or config.password_env, not both');
  return {
    engine,
    password: given,
    clearPassword: password === null,
    passwordEnv: typeof passwordEnv === 'string' ? passwordEnv : undefined,
    readOnly: typeof readOnly === 'boolean' ? readOnly : undefined,
  };
}

/** The engine's part of a kept config (without the service's fields). */
export function engineConfigOf(config: Record<string, unknown>): Record<string, unknown> {
  const engine = { ...config };
  for (const field of SERVICE_FIELDS) delete engine[field];
  return engine;
}

/**
 * A url without its password, and the password (decoded); urls that do not parse are left to
 * the engine's check. The mask as a password (a view sent back in a patch) counts as none.
 */
function splitUrl(url: string): { url: string; password: string | undefined } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url, password: undefined };
  }
  if (parsed.password === '') return { url, password: undefined };
  const password = decodeURIComponent(parsed.password);
  parsed.password = '';
  return { url: parsed.toString(), password: password === MASK ? undefined : password };
}

/** The config as every view shows it: `password_set` when a password is kept, a url's userinfo masked. */
export function configView(config: Record<string, unknown>, passwordSet: boolean): Record<string, unknown> {
  if (!passwordSet) return config;
  const shown: Record<string, unknown> = { ...config, password_set: true };
  if (typeof config.url === 'string') {
    try {
      const parsed = new URL(config.url);
      parsed.password = MASK;
      shown.url = parsed.toString();
    } catch {
      // A url that does not parse was kept as given; it cannot hold a password we took out.
    }
  }
  return shown;
}

/** The host an external store's config points at: `host`, else the url's; undefined when it names none. */
export function hostOf(config: Record<string, unknown>): string | undefined {
  if (typeof config.host === 'string' && config.host !== '') return config.host;
  if (typeof config.url !== 'string') return undefined;
  try {
    const host = new URL(config.url).hostname;
    return host === '' ? undefined : host.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return undefined;
  }
}

/** Where a config connects, as written: its host and port (the url's where the fields are absent). */
export function endpointOf(config: Record<string, unknown>): string {
  let urlPort = '';
  try {
    if (typeof config.url === 'string') urlPort = new URL(config.url).port;
  } catch {
    // A url that does not parse names no port.
  }
  return `${hostOf(config) ?? ''}:${typeof config.port === 'number' || typeof config.port === 'string' ? String(config.port) : urlPort}`;
}

/**
 * Whether `host` matches one of the globs of `[stores].allowed_hosts` (`*` any run of
 * characters, `?` one; case-insensitive).
 */
export function hostAllowed(host: string, globs: readonly string[]): boolean {
  return globs.some((glob) => globPattern(glob).test(host));
}

const patterns = new Map<string, RegExp>();

function globPattern(glob: string): RegExp {
  let pattern = patterns.get(glob);
  if (!pattern) {
    const body = glob
      .split('')
      .map((char) => (char === '*' ? '.*' : char === '?' ? '.' : char.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
      .join('');
    pattern = new RegExp(`^${body}$`, 'i');
    patterns.set(glob, pattern);
  }
  return pattern;
}

/**
 * The password an external store connects with: the kept one (opened by the caller), else the
 * server's environment variable named by `password_env`, read now. STORE_UNAVAILABLE when
 * that variable is not set (the store cannot connect until the server has it).
 */
export function passwordFromEnv(
  store: { kind: StoreKind; name: string },
  passwordEnv: unknown,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (typeof passwordEnv !== 'string') return undefined;
  const value = env[passwordEnv];
  if (value === undefined) {
    throw new ServiceError('STORE_UNAVAILABLE', `${store.kind} store '${store.name}': environment variable ${passwordEnv} (config.password_env) is not set on the server`);
  }
  return value;
}

/**
 * An error as it may be logged or answered. A ServiceError is returned as it is: the engines
 * build its message from fixed text, names the caller chose and a connection failure's code
 * or scrubbed driver message (external-errors.ts), so the password is in it only where the
 * caller wrote it, and masking it there would tell the caller which of their words was the
 * password. Any other error (a driver's own exception, which the client never sees: it is a
 * 500 and logged) has the password replaced by the mask.
 */
export function scrubbed(err: unknown, password: string | undefined): unknown {
  if (!password || !(err instanceof Error) || err instanceof ServiceError) return err;
  const secrets = [password, encodeURIComponent(password)];
  if (!secrets.some((secret) => err.message.includes(secret))) return err;
  return new Error(secrets.reduce((out, secret) => out.replaceAll(secret, MASK), err.message));
}
