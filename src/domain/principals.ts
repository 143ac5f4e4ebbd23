import { createHash } from 'node:crypto';

/**
 * Who a request acts for: the API key it presented. Named keys come from `[[api.keys]]`;
 * unnamed keys (flags, key file, SERVICE_API_KEY, `[api].api_key`) are named after their digest.
 */
export interface Principal {
  name: string;
  /** May use the admin-only actions (policy.*, permissions.grant/revoke, llm.keys.*, proxy.hooks.*). */
  admin: boolean;
  labels: Record<string, string>;
}

/** An accepted API key and the principal it stands for. */
export interface ApiKey extends Principal {
  key: string;
}

/** Principal names: what `[[api.keys]]` names and grants refer to. */
export const PRINCIPAL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,62}$/;

/** The principal of a request that presented no key, on a server that asks for none (or on an open route). */
export const ANONYMOUS = 'anonymous';

/** The name of an unnamed key: `key-` and the first 8 hex digits of its SHA-256, which says nothing usable about the key. */
export function unnamedKeyName(key: string): string {
  return `key-${createHash('sha256').update(key).digest('hex').slice(0, 8)}`;
}

/**
 * The principals of a server's keys: named keys as given, unnamed keys under their digest names
 * (a key both named and unnamed keeps its name). When no key is marked admin, every key is an
 * admin, so that a server configured before principals existed keeps working unchanged.
 */
export function principalsOf(named: readonly ApiKey[], unnamed: readonly string[]): ApiKey[] {
  const keys: ApiKey[] = named.map((k) => ({ ...k, labels: { ...k.labels } }));
  const known = new Set(keys.map((k) => k.key));
  for (const key of unnamed) {
    if (known.has(key)) continue;
    known.add(key);
    keys.push({ name: unnamedKeyName(key), key, admin: false, labels: {} });
  }
  if (!keys.some((k) => k.admin)) for (const k of keys) k.admin = true;
  return keys;
}

/** agentkernel's permission kinds, which grants and checks accept beside an action (what each means: services/governance/actions.ts). */
export const PERMISSION_KIND_NAMES = ['sudo_exec', 'sandbox_remove', 'sandbox_create', 'file_delete', 'network_access'] as const;
export type PermissionKind = (typeof PERMISSION_KIND_NAMES)[number];
