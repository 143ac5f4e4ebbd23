import type { IncomingHttpHeaders } from 'node:http';
import { destinationsOf, targetMatches, type Destinations } from '../../domain/destinations.js';
import { defaultPortOf, parseSecretHost } from '../../domain/secret-hosts.js';
import type { SandboxSecretsInput } from '../../schemas/proxy-schemas.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import type { SecretBox } from '../support/secret-box.js';
import { echoForms, type Replacement } from './secret-scrubber.js';

/** One secret as the proxy uses it. */
interface OpenSecret {
  placeholder: string;
  value: string;
  host: Destinations;
  /** The port named with the host; undefined: the request's scheme's default. */
  port: number | undefined;
  /** Also swapped in HTTPS requests (the proxy terminates TLS toward its host). */
  intercept: boolean;
}

/** Where a request goes: its host (name or address), port and scheme. */
export interface SecretTarget {
  host: string;
  port: number;
  scheme: 'http' | 'https';
}

/** The secrets of one request: its headers swapped, and what to replace in the answer. */
export interface Swapped {
  headers: IncomingHttpHeaders;
  /** Values (in the forms an echo may take) and the placeholders that replace them going back. */
  scrub: Replacement[];
}

const aadOf = (sandboxUuid: string, name: string) => `sandbox-secret:${sandboxUuid}:${name}`;

/**
 * Sandbox secrets: values kept with SecretBox, each bound to its sandbox and name, and the
 * swap the egress proxy makes: a placeholder in a request header (or in basic-auth
 * credentials) becomes the value on requests to the secret's host and port, and stays a
 * placeholder toward any other; what the upstream answers has the value replaced by the
 * placeholder again. Values are opened once per sandbox and kept in memory while it exists.
 */
export class SandboxSecrets {
  private readonly open = new Map<string, OpenSecret[]>();

  constructor(
    private readonly input: { repo: ProxyRepository; box: SecretBox },
  ) {}

  /** Seals and stores the secrets a create asked for; the placeholders are the ones in the sandbox's env. */
  async save(sandboxUuid: string, secrets: SandboxSecretsInput, env: Record<string, string>): Promise<void> {
    await this.input.repo.putSecrets(
      Object.entries(secrets).map(([name, { value, host, intercept_tls }]) => ({
        sandbox_uuid: sandboxUuid,
        name,
        host,
        placeholder: env[name] ?? '',
        secret: this.input.box.seal(value, aadOf(sandboxUuid, name)),
        intercept_tls: intercept_tls ? 1 : 0,
      })),
    );
    this.open.delete(sandboxUuid);
  }

  async remove(sandboxUuid: string): Promise<void> {
    await this.input.repo.deleteSecrets(sandboxUuid);
    this.open.delete(sandboxUuid);
  }

  /**
   * The request's headers with the placeholders of the sandbox's secrets for `target` swapped
   * for their values (the same object when none is for it), and what to replace in its answer.
   * Over https only the secrets with `intercept_tls` count (the others never see the request).
   */
  async swap(sandboxUuid: string, target: SecretTarget, headers: IncomingHttpHeaders): Promise<Swapped> {
    const secrets = (await this.secretsOf(sandboxUuid)).filter((s) => isFor(s, target));
    if (secrets.length === 0) return { headers, scrub: [] };
    const scrub = secrets.flatMap((s) => echoForms(s.value, s.placeholder));
    const out: IncomingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      out[name] = Array.isArray(value) ? value.map((v) => swapValue(v, secrets, scrub)) : swapValue(value, secrets, scrub);
    }
    return { headers: out, scrub };
  }

  /** Whether a CONNECT to `host:port` is for one of the sandbox's secrets with `intercept_tls`. */
  async intercepts(sandboxUuid: string, host: string, port: number): Promise<boolean> {
    return (await this.secretsOf(sandboxUuid)).some((s) => isFor(s, { host, port, scheme: 'https' }));
  }

  /** Whether the sandbox has a secret with `intercept_tls` (and so trusts the proxy's CA). */
  async intercepting(sandboxUuid: string): Promise<boolean> {
    return (await this.secretsOf(sandboxUuid)).some((s) => s.intercept);
  }

  private async secretsOf(sandboxUuid: string): Promise<OpenSecret[]> {
    let secrets = this.open.get(sandboxUuid);
    if (!secrets) {
      secrets = (await this.input.repo.secrets(sandboxUuid)).map((row) => {
        const parsed = parseSecretHost(row.host);
        const where = typeof parsed === 'string' ? { host: row.host, port: undefined } : parsed;
        return {
          placeholder: row.placeholder,
          value: this.input.box.open(row.secret, aadOf(sandboxUuid, row.name)),
          host: destinationsOf([where.host]),
          port: where.port,
          intercept: row.intercept_tls === 1,
        };
      });
      if (this.open.size > 10_000) this.open.clear();
      this.open.set(sandboxUuid, secrets);
    }
    return secrets;
  }
}

/** Whether a secret is swapped on a request to `target`. */
function isFor(secret: OpenSecret, target: SecretTarget): boolean {
  if (target.scheme === 'https' && !secret.intercept) return false;
  return (secret.port ?? defaultPortOf(target.scheme)) === target.port && targetMatches(secret.host, target.host);
}

/**
 * A header value with placeholders swapped, also inside `Basic` credentials; the credentials
 * as sent are added to `scrub`, so that an echo of them goes back as the sandbox sent them.
 */
function swapValue(value: string, secrets: OpenSecret[], scrub: Replacement[]): string {
  let out = value;
  for (const s of secrets) if (out.includes(s.placeholder)) out = out.replaceAll(s.placeholder, s.value);
  const [, scheme, encoded] = /^(Basic\s+)([A-Za-z0-9+/=]+)$/i.exec(out) ?? [];
  if (scheme !== undefined && encoded !== undefined) {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    let swapped = decoded;
    for (const s of secrets) if (swapped.includes(s.placeholder)) swapped = swapped.replaceAll(s.placeholder, s.value);
    if (swapped !== decoded) {
      const sent = Buffer.from(swapped, 'utf8').toString('base64');
      scrub.push({ from: sent, to: encoded });
      out = `${scheme}${sent}`;
    }
  }
  return out;
}
