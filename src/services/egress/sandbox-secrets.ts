import type { IncomingHttpHeaders } from 'node:http';
import { destinationsOf, targetMatches, type Destinations } from '../../domain/destinations.js';
import type { SandboxSecretsInput } from '../../schemas/proxy-schemas.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import type { SecretBox } from '../support/secret-box.js';

/** One secret as the proxy uses it. */
interface OpenSecret {
  placeholder: string;
  value: string;
  host: Destinations;
}

const aadOf = (sandboxUuid: string, name: string) => `sandbox-secret:${sandboxUuid}:${name}`;

/**
 * Sandbox secrets: values kept with SecretBox, each bound to its sandbox and name, and the
 * swap the egress proxy makes: a placeholder in a request header (or in basic-auth
 * credentials) becomes the value on requests to the secret's host, and stays a placeholder
 * toward any other host. Values are opened once per sandbox and kept in memory while it exists.
 */
export class SandboxSecrets {
  private readonly open = new Map<string, OpenSecret[]>();

  constructor(
    private readonly input: { repo: ProxyRepository; box: SecretBox },
  ) {}

  /** Seals and stores the secrets a create asked for; the placeholders are the ones in the sandbox's env. */
  save(sandboxUuid: string, secrets: SandboxSecretsInput, env: Record<string, string>): void {
    this.input.repo.putSecrets(
      Object.entries(secrets).map(([name, { value, host }]) => ({
        sandbox_uuid: sandboxUuid,
        name,
        host,
        placeholder: env[name] ?? '',
        secret: this.input.box.seal(value, aadOf(sandboxUuid, name)),
      })),
    );
    this.open.delete(sandboxUuid);
  }

  remove(sandboxUuid: string): void {
    this.input.repo.deleteSecrets(sandboxUuid);
    this.open.delete(sandboxUuid);
  }

  /**
   * The headers with the sandbox's placeholders swapped for the values of the secrets whose
   * host matches `host`; the same object when nothing was swapped.
   */
  swap(sandboxUuid: string, host: string, headers: IncomingHttpHeaders): IncomingHttpHeaders {
    const secrets = this.secretsOf(sandboxUuid).filter((s) => targetMatches(s.host, host));
    if (secrets.length === 0) return headers;
    const out: IncomingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      out[name] = Array.isArray(value) ? value.map((v) => swapValue(v, secrets)) : swapValue(value, secrets);
    }
    return out;
  }

  private secretsOf(sandboxUuid: string): OpenSecret[] {
    let secrets = this.open.get(sandboxUuid);
    if (!secrets) {
      secrets = this.input.repo.secrets(sandboxUuid).map((row) => ({
        placeholder: row.placeholder,
        value: this.input.box.open(row.secret, aadOf(sandboxUuid, row.name)),
        host: destinationsOf([row.host]),
      }));
      if (this.open.size > 10_000) this.open.clear();
      this.open.set(sandboxUuid, secrets);
    }
    return secrets;
  }
}

/** A header value with placeholders swapped, also inside `Basic` credentials. */
function swapValue(value: string, secrets: OpenSecret[]): string {
  let out = value;
  for (const s of secrets) if (out.includes(s.placeholder)) out = out.replaceAll(s.placeholder, s.value);
  const [, scheme, encoded] = /^(Basic\s+)([A-Za-z0-9+/=]+)$/i.exec(out) ?? [];
  if (scheme !== undefined && encoded !== undefined) {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    let swapped = decoded;
    for (const s of secrets) if (swapped.includes(s.placeholder)) swapped = swapped.replaceAll(s.placeholder, s.value);
    if (swapped !== decoded) out = `${scheme}${Buffer.from(swapped, 'utf8').toString('base64')}`;
  }
  return out;
}
