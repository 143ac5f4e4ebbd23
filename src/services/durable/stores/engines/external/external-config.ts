/**
 * The config of the external store kinds (postgres, mysql, redis): checking a create's or
 * patch's `config`, finding the password a client sent (in `password` or in a url's userinfo)
 * so the service can seal it, and resolving where a store connects.
 *
 * A store is given either `url` (`postgres://user@host:5432/db`, `mysql://...`,
 * `redis://...`/`rediss://...`) or the separate fields (`host`, `port`, `user`, `database`,
 * redis `db`), never both. The checked config never holds a password: the url is kept without
 * its password, and `password` itself is dropped.
 */
import type { ConnectionOptions } from 'node:tls';
import { badRequest } from '../../../../../errors.js';
import type { StoreTarget } from '../../store-engine.js';

export type ExternalKind = 'postgres' | 'mysql' | 'redis';

/** What differs between the three kinds' configs. */
export interface ExternalSpec {
  kind: ExternalKind;
  /** Url schemes accepted; a scheme mapped to true turns TLS on (`rediss:`). */
  schemes: Record<string, boolean>;
  defaultPort: number;
  /** Filled into the checked config when there is no url and no user. */
  defaultUser?: string;
  /** The TLS field: `ssl` on the SQL kinds, `tls` on redis. */
  tlsField: 'ssl' | 'tls';
  /** Fields of this kind only, each checked by its function (throws BAD_REQUEST naming it). */
  extraFields: Record<string, (value: unknown, field: string) => unknown>;
}

/** Where and as whom a store connects, resolved at open. */
export interface Endpoint {
  /** The host as configured: messages name it, TLS checks the certificate against it. */
  host: string;
  /** The address the service checked `host` resolves to, connected to instead of looking it up again. */
  address?: string;
  port: number;
  user: string | undefined;
  password: string | undefined;
  /** Postgres and mysql: the database; redis: its number as a string (`config.db`). */
  database: string | undefined;
  /** undefined: plain TCP. */
  tls: ConnectionOptions | undefined;
}

/**
 * Where a driver connects (the checked address, else the host) and the TLS options with the
 * host's name to check the certificate against when it connects to an address.
 */
export function connectTarget(endpoint: Endpoint): { host: string; tls: ConnectionOptions | undefined } {
  const host = endpoint.address ?? endpoint.host;
  const named = endpoint.tls && host !== endpoint.host && !/^[\d.]+$|:/.test(endpoint.host);
  return { host, tls: named ? { ...endpoint.tls, servername: endpoint.host } : endpoint.tls };
}

/** `host:port`, with brackets around an IPv6 address. */
export const hostPort = (endpoint: Pick<Endpoint, 'host' | 'port'>): string =>
  endpoint.host.includes(':') ? `[${endpoint.host}]:${endpoint.port}` : `${endpoint.host}:${endpoint.port}`;

const CONNECTION_FIELDS = ['host', 'port', 'user', 'database', 'db'] as const;
const HOST = /^[A-Za-z0-9._:-]{1,253}$/;

/** Settings of the postgres, mysql and redis engines (tests shorten them). */
export interface ExternalEngineOptions {
  /** A pooled connection idle this long is closed (default 5 minutes). */
  idleMs?: number;
  /** How long connecting may take before the store counts as unreachable (default 10 s). */
  connectTimeoutMs?: number;
}

/**
 * Checks an external store's config and returns it normalised: defaults filled in, the url
 * without its password. The service's own fields (`password`, `password_env`, `read_only`)
 * never reach it: the service takes them out first, and a password from the url with them
 * (store-credentials.ts). Every refusal is BAD_REQUEST naming `config.<field>`.
 */
export function checkExternalConfig(spec: ExternalSpec, config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(config)) {
    // null removes a field (a PATCH merged over the stored config, e.g. host: null to switch to a url).
    if (value === undefined || value === null) continue;
    const name = `config.${field}`;
    switch (field) {
      case 'url':
        out.url = checkUrl(spec, value).url;
        break;
      case 'host':
        if (typeof value !== 'string' || !HOST.test(value)) throw badRequest(`${name}: must be a host name or an IP address`);
        out.host = value;
        break;
      case 'port':
        out.port = checkInteger(value, name, 1, 65535);
        break;
      case 'user':
        out.user = checkText(value, name, 128);
        break;
      case spec.tlsField:
        out[field] = checkTls(value, name);
        break;
      default: {
        const check = spec.extraFields[field];
        if (!check) throw badRequest(`${name}: unknown field for a ${spec.kind} store`);
        out[field] = check(value, name);
      }
    }
  }
  if (typeof out.url === 'string') {
    const mixed = CONNECTION_FIELDS.find((field) => field in out);
    if (mixed) throw badRequest(`config.${mixed}: give either config.url or the separate connection fields, not both`);
  } else {
    out.port ??= spec.defaultPort;
    if (spec.defaultUser !== undefined) out.user ??= spec.defaultUser;
  }
  return out;
}

interface ParsedUrl {
  /** The url without its password. */
  url: string;
  host: string;
  port: number | undefined;
  user: string | undefined;
  path: string | undefined;
  tls: boolean;
}

function checkUrl(spec: ExternalSpec, value: unknown): ParsedUrl {
  const schemes = Object.keys(spec.schemes).map((scheme) => `${scheme}//`).join(' or ');
  if (typeof value !== 'string' || value.length > 2048) throw badRequest(`config.url: must be a ${schemes} url`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(`config.url: must be a ${schemes} url`);
  }
  const tls = spec.schemes[url.protocol];
  if (tls === undefined) throw badRequest(`config.url: must be a ${schemes} url, not ${url.protocol}//`);
  if (url.hostname === '') throw badRequest('config.url: names no host');
  if (url.search !== '' || url.hash !== '') {
    throw badRequest(`config.url: query parameters are not supported; use config.${spec.tlsField} for TLS`);
  }
  url.password = '';
  const path = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (spec.kind === 'redis' && path !== '' && !/^\d{1,5}$/.test(path)) {
    throw badRequest('config.url: the path of a redis url is the database number (redis://host:6379/0)');
  }
  return {
    url: url.toString(),
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? undefined : Number(url.port),
    user: url.username === '' ? undefined : decodeURIComponent(url.username),
    path: path === '' ? undefined : path,
    tls,
  };
}

function checkTls(value: unknown, name: string): unknown {
  if (typeof value === 'boolean' || value === 'require') return value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest(`${name}: must be true, false, "require" or {ca?, reject_unauthorized?}`);
  }
  const out: Record<string, unknown> = {};
  for (const [field, inner] of Object.entries(value)) {
    if (field === 'ca') out.ca = checkText(inner, `${name}.ca`, 65536);
    else if (field === 'reject_unauthorized') {
      if (typeof inner !== 'boolean') throw badRequest(`${name}.reject_unauthorized: must be true or false`);
      out.reject_unauthorized = inner;
    } else throw badRequest(`${name}.${field}: unknown field (ca and reject_unauthorized are known)`);
  }
  return out;
}

/** Node's TLS options for a checked `ssl`/`tls` value (and `rediss:`); undefined: no TLS. */
function tlsOptions(value: unknown, fromScheme: boolean): ConnectionOptions | undefined {
  if (value === false || (value === undefined && !fromScheme)) return undefined;
  // "require" encrypts without checking the certificate, as libpq's sslmode=require does.
  if (value === 'require') return { rejectUnauthorized: false };
  if (value === true || value === undefined) return { rejectUnauthorized: true };
  const { ca, reject_unauthorized } = value as { ca?: string; reject_unauthorized?: boolean };
  return { ...(ca === undefined ? {} : { ca }), rejectUnauthorized: reject_unauthorized ?? true };
}

export function checkInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badRequest(`${name}: must be an integer from ${min} to ${max}`);
  }
  return value;
}

export function checkText(value: unknown, name: string, max: number): string {
  if (typeof value !== 'string' || value === '' || value.length > max) {
    throw badRequest(`${name}: must be a non-empty string of at most ${max} characters`);
  }
  return value;
}

/**
 * Where a store connects: its url or fields, the bound sandbox's address when there is no
 * host, and the password the service decrypted. BAD_REQUEST naming `config.host` when there
 * is neither a host nor a sandbox to default to.
 */
export function resolveEndpoint(spec: ExternalSpec, target: StoreTarget): Endpoint {
  const config = target.config;
  const tlsValue = config[spec.tlsField];
  if (typeof config.url === 'string') {
    const url = checkUrl(spec, config.url);
    return {
      host: url.host,
      ...(target.address === undefined ? {} : { address: target.address }),
      port: url.port ?? spec.defaultPort,
      user: url.user ?? spec.defaultUser,
      password: target.password,
      database: url.path,
      tls: tlsOptions(tlsValue, url.tls),
    };
  }
  const host = typeof config.host === 'string' ? config.host : target.defaultHost;
  if (host === undefined) {
    throw badRequest(`config.host: required for a ${spec.kind} store that is not bound to a sandbox`);
  }
  const database = config.database ?? config.db;
  return {
    host,
    ...(target.address === undefined ? {} : { address: target.address }),
    port: typeof config.port === 'number' ? config.port : spec.defaultPort,
    user: typeof config.user === 'string' ? config.user : spec.defaultUser,
    password: target.password,
    database: database === undefined ? undefined : String(database),
    tls: tlsOptions(tlsValue, false),
  };
}
