import { isIP } from 'node:net';
import type { Profile } from './profiles.js';

/**
 * What a sandbox's network reaches (DECISIONS-WAVE2 5.4, "enforced egress"): `open` is the
 * outside world directly (never the host's own addresses nor link-local ones unless allowed);
 * `proxy` is the egress proxy on the gateway and nothing else; `none` is no network at all.
 */
export const EGRESS_MODES = ['open', 'proxy', 'none'] as const;
export type EgressMode = (typeof EGRESS_MODES)[number];

/** A sandbox's `network` field as stored and shown; the proxy reads it per request. */
export interface SandboxNetwork {
  egress: EgressMode;
  /** Host-name globs (`*.github.com`), literal addresses or CIDR ranges. */
  allow: string[];
  deny: string[];
}

/** The egress a profile gets when the create names none. */
export function defaultEgress(profile: Profile): EgressMode {
  return profile === 'restrictive' ? 'none' : 'open';
}

/**
 * One `allow` / `deny` entry, classified. `port`: the entry names that port alone
 * (`127.0.0.1:8080`, `api.example.com:443`); without one it stands for every port.
 */
export type NetworkEntry = ({ kind: 'host'; pattern: string } | { kind: 'cidr'; cidr: string; family: 4 | 6 }) & { port?: number };

/** Letters, digits, `-`, `_`, with `*` and `?` wildcards, dot-separated labels. */
const HOST_GLOB = /^(?=.{1,253}$)(?:[A-Za-z0-9_*?](?:[A-Za-z0-9_*?-]{0,61}[A-Za-z0-9_*?])?)(?:\.(?:[A-Za-z0-9_*?](?:[A-Za-z0-9_*?-]{0,61}[A-Za-z0-9_*?])?))*$/;

/**
 * An entry as the packet filter and the proxy use it, or the reason it is none: a literal
 * address (`10.1.2.3`, `::1`, made a /32 or /128), a CIDR range whose address has no bits past
 * its prefix, or a host-name glob; each with an optional `:port` (an IPv6 address or range in
 * brackets then: `[::1]:8080`, `[fd00::/8]:443`).
 */
export function parseNetworkEntry(entry: string): NetworkEntry | string {
  if (entry.length === 0) return 'must not be empty';
  const split = splitPort(entry);
  if (typeof split === 'string') return split;
  const parsed = parseTarget(split.target, entry);
  if (typeof parsed === 'string' || split.port === undefined) return parsed;
  return { ...parsed, port: split.port };
}

/** The target and port of an entry: `[v6]:port`, `name:port`, `a.b.c.d/n:port`; a bare IPv6 address has no port. */
function splitPort(entry: string): { target: string; port?: number } | string {
  let target = entry;
  let portText: string | undefined;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close < 0) return `'${entry}' opens a [ it does not close: write an IPv6 address with a port as [::1]:8080`;
    target = entry.slice(1, close);
    const rest = entry.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) return `'${entry}' has '${rest}' after its ]: only :<port> may follow`;
    if (rest !== '') portText = rest.slice(1);
    if (isIP(target.split('/')[0] ?? '') !== 6) return `'${entry}' has no IPv6 address or range in its brackets`;
  } else if (entry.split(':').length === 2) {
    [target = '', portText] = entry.split(':');
  }
  if (portText === undefined) return { target };
  if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) return `'${entry}' has a bad port '${portText}': use 1-65535, as in example.com:443`;
  return { target, port: Number(portText) };
}

function parseTarget(target: string, entry: string): NetworkEntry | string {
  if (target.length === 0) return `'${entry}' names no host or address before its port`;
  const slash = target.indexOf('/');
  const address = slash < 0 ? target : target.slice(0, slash);
  const family = isIP(address);
  if (family === 4 || family === 6) {
    const max = family === 4 ? 32 : 128;
    if (slash < 0) return { kind: 'cidr', cidr: `${address}/${max}`, family };
    const bits = target.slice(slash + 1);
    if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) return `'${entry}' has a bad prefix length: use 0-${max}, as in 10.1.2.0/24`;
    if (family === 4 && !isNetworkAddress(address, Number(bits))) return `'${entry}' has bits set past its prefix: did you mean ${networkOf(address, Number(bits))}/${bits}?`;
    return { kind: 'cidr', cidr: target, family };
  }
  if (slash >= 0) return `'${entry}' is not a CIDR range: the part before / must be an IPv4 or IPv6 address`;
  if (/^[\d.]+$/.test(target)) return `'${entry}' is not an IPv4 address`;
  if (!HOST_GLOB.test(target)) return `'${entry}' is not a host name glob (letters, digits, - and _ in dot-separated labels, with * and ? wildcards), an address or a CIDR range, with an optional :port`;
  return { kind: 'host', pattern: target.toLowerCase() };
}

/** An IPv4 address as a number. */
export function ipv4Value(address: string): number {
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

/** The netmask of a prefix length, as a number. */
export function maskOf(bits: number): number {
  return bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
}

function isNetworkAddress(address: string, bits: number): boolean {
  return ((ipv4Value(address) & maskOf(bits)) >>> 0) === ipv4Value(address);
}

/** The dotted form of an IPv4 number. */
export function ipv4Text(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');
}

function networkOf(address: string, bits: number): string {
  return ipv4Text((ipv4Value(address) & maskOf(bits)) >>> 0);
}
