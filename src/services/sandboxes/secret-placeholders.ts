import { randomBytes } from 'node:crypto';
import type { SandboxSecretsInput } from '../../schemas/proxy-schemas.js';

/** How every placeholder starts: the egress proxy swaps only what it gave out. */
const PLACEHOLDER_PREFIX = 'sbx-secret-';

/**
 * What a create with `secrets` puts in the sandbox: a random placeholder per name in its env
 * (never the value) and `secret_mappings` `{ENV_NAME: host}` for its views.
 */
export function secretPlaceholders(secrets: SandboxSecretsInput | undefined): { env: Record<string, string>; mappings: Record<string, string> } | undefined {
  if (!secrets || Object.keys(secrets).length === 0) return undefined;
  const env: Record<string, string> = {};
  const mappings: Record<string, string> = {};
  for (const [name, { host }] of Object.entries(secrets)) {
    env[name] = `${PLACEHOLDER_PREFIX}${randomBytes(18).toString('base64url')}`;
    mappings[name] = host;
  }
  return { env, mappings };
}
