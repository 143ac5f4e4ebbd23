import { destinationError } from './destinations.js';

/** The host of a sandbox secret: a host glob or IP/CIDR, and the port it is swapped toward. */
export interface SecretHost {
  /** A host-name glob, an IP or a CIDR (as an `allow` entry). */
  host: string;
  /** The port named (`api.example.com:8443`); absent: the scheme's default (80 for http://, 443 for https://). */
  port?: number;
}

/**
 * A secret's `host` split into host and port, or why it is none: `api.example.com`,
 * `*.example.com:8443`, `10.0.0.5:8080`, `[::1]:8443`; a bare IPv6 address (`::1`) has no port.
 */
export function parseSecretHost(entry: string): SecretHost | string {
  let host = entry;
  let port: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) {
    host = bracketed[1] ?? '';
    port = bracketed[2];
  } else if ((entry.match(/:/g) ?? []).length === 1) {
    const at = entry.indexOf(':');
    host = entry.slice(0, at);
    port = entry.slice(at + 1);
    if (!/^\d+$/.test(port)) return `'${entry}': the port after ':' must be a number from 1 to 65535`;
  }
  if (port !== undefined && (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)) return `'${entry}': the port must be a number from 1 to 65535`;
  const problem = destinationError(host);
  if (problem) return problem;
  return port === undefined ? { host } : { host, port: Number(port) };
}

/** The port a secret without one is swapped toward, by the scheme of the request. */
export const defaultPortOf = (scheme: 'http' | 'https'): number => (scheme === 'https' ? 443 : 80);
