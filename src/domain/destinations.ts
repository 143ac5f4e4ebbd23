import { BlockList, isIP } from 'node:net';
import { parseNetworkEntry } from './egress.js';

/**
 * Destination rules of the egress proxy: an entry of a sandbox's `allow` / `deny` list is a
 * host-name glob (`pypi.org`, `*.github.com`: `*` is any run of characters, dots too, `?` one
 * character, case-insensitive; `*.github.com` does not match `github.com` itself) or, for
 * literal addresses, an IP or a CIDR (`10.1.2.0/24`, `::1`). Entries are checked by
 * `parseNetworkEntry`, as the sandbox `network` field's are.
 */
export interface Destinations {
  /** Whether the host name matches one of the globs. */
  host(name: string): boolean;
  /** Whether an address is one of the IPs / in one of the CIDRs. */
  address(ip: string): boolean;
  /** The entries that are addresses (IPs, CIDRs), for the refusal messages. */
  readonly hasAddresses: boolean;
  readonly hasHosts: boolean;
}

const escape = (text: string) => text.replace(/[.+^${}()|[\]\\]/g, '\\$&');
/** `*` is any run of characters (dots too), `?` one character. */
const globSource = (pattern: string) => escape(pattern).replaceAll('*', '.*').replaceAll('?', '.');

/**
 * Why an entry is no destination rule, or undefined when it is one: the same check as the
 * sandbox `network` field's (`parseNetworkEntry`), so every list a sandbox can hold compiles.
 */
export function destinationError(entry: string): string | undefined {
  if (typeof entry !== 'string') return 'must be a non-empty string';
  const parsed = parseNetworkEntry(entry);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** A compiled `allow` or `deny` list; throws an Error naming the first bad entry. */
export function compileDestinations(entries: readonly string[]): Destinations {
  const globs: string[] = [];
  const blocks = new BlockList();
  let hasAddresses = false;
  for (const entry of entries) {
    const parsed = parseNetworkEntry(entry);
    if (typeof parsed === 'string') throw new Error(parsed);
    const cidr = parsed.kind === 'cidr' ? cidrOf(parsed.cidr) : undefined;
    if (cidr) {
      blocks.addSubnet(cidr.address, cidr.prefix, cidr.family);
      hasAddresses = true;
    } else if (parsed.kind === 'host') globs.push(parsed.pattern);
  }
  const pattern = globs.length > 0 ? new RegExp(`^(?:${globs.map(globSource).join('|')})$`, 'i') : undefined;
  return {
    host: (name) => pattern !== undefined && pattern.test(name.toLowerCase().replace(/\.$/, '')),
    address: (ip) => hasAddresses && inList(blocks, ip),
    hasAddresses,
    hasHosts: pattern !== undefined,
  };
}

/** Compiled lists, kept while the same list comes back (the lookup is read per request). */
const compiled = new Map<string, Destinations>();

/** `compileDestinations`, memoised on the list's content (bounded). */
export function destinationsOf(entries: readonly string[]): Destinations {
  const key = entries.join('\n');
  let found = compiled.get(key);
  if (!found) {
    found = compileDestinations(entries);
    if (compiled.size > 1000) compiled.clear();
    compiled.set(key, found);
  }
  return found;
}

/** Whether a host glob (of a secret, of a hook's match) matches a host. */
export function hostGlobMatches(glob: string, host: string): boolean {
  return destinationsOf([glob]).host(host);
}

/** A host without the brackets of an IPv6 literal. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) as the IPv4 address it is. */
export function plainAddress(ip: string): string {
  return /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1] ?? ip;
}

export function inList(list: BlockList, ip: string): boolean {
  const plain = plainAddress(ip);
  const family = isIP(plain);
  return family !== 0 && list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
}

export function cidrOf(entry: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [rawAddress = '', prefixText, ...rest] = entry.split('/');
  const address = plainAddress(unbracket(rawAddress));
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return undefined;
  const max = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

/** Whether a request's host matches a list: a literal address (bracketed or not) by IP/CIDR or as text, a name by glob. */
export function targetMatches(list: Destinations, host: string): boolean {
  const bare = plainAddress(unbracket(host));
  return isIP(bare) ? list.address(bare) || list.host(bare) : list.host(host);
}
