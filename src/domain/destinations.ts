import { BlockList, isIP } from 'node:net';
import { parseNetworkEntry } from './egress.js';
import { addRange, inList, plainAddress } from './private-addresses.js';

/**
 * Destination rules of the egress proxy: an entry of a sandbox's `allow` / `deny` list is a
 * host-name glob (`pypi.org`, `*.github.com`: `*` is any run of characters, dots too, `?` one
 * character, case-insensitive; `*.github.com` does not match `github.com` itself) or, for
 * literal addresses, an IP or a CIDR (`10.1.2.0/24`, `::1`); each with an optional port
 * (`127.0.0.1:8080`, `*.example.com:443`, `[::1]:8080`): without one it matches every port.
 * Entries are checked by `parseNetworkEntry`, as the sandbox `network` field's are.
 */
export interface Destinations {
  /** Whether the host name matches one of the globs (on `port`; undefined: entries with a port do not match). */
  host(name: string, port?: number): boolean;
  /** Whether an address is one of the IPs / in one of the CIDRs (on `port`, as for `host`). */
  address(ip: string, port?: number): boolean;
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

/** The entries of one port (or of every port): globs and address ranges. */
interface PortRules {
  globs: string[];
  blocks: BlockList;
  hasAddresses: boolean;
  pattern?: RegExp;
}

/** A compiled `allow` or `deny` list; throws an Error naming the first bad entry. */
export function compileDestinations(entries: readonly string[]): Destinations {
  /** Keyed by port; 0 holds the entries without one (every port). */
  const byPort = new Map<number, PortRules>();
  const rulesOf = (port: number): PortRules => {
    let rules = byPort.get(port);
    if (!rules) byPort.set(port, (rules = { globs: [], blocks: new BlockList(), hasAddresses: false }));
    return rules;
  };
  for (const entry of entries) {
    const parsed = parseNetworkEntry(entry);
    if (typeof parsed === 'string') throw new Error(parsed);
    const rules = rulesOf(parsed.port ?? 0);
    if (parsed.kind === 'cidr') rules.hasAddresses = addRange(rules.blocks, parsed.cidr) || rules.hasAddresses;
    else rules.globs.push(parsed.pattern);
  }
  for (const rules of byPort.values()) {
    if (rules.globs.length > 0) rules.pattern = new RegExp(`^(?:${rules.globs.map(globSource).join('|')})$`, 'i');
  }
  const ofPort = (port: number | undefined) => [byPort.get(0), port === undefined || port === 0 ? undefined : byPort.get(port)];
  const all = [...byPort.values()];
  return {
    host: (name, port) => {
      const bare = name.toLowerCase().replace(/\.$/, '');
      return ofPort(port).some((rules) => rules?.pattern !== undefined && rules.pattern.test(bare));
    },
    address: (ip, port) => ofPort(port).some((rules) => rules !== undefined && rules.hasAddresses && inList(rules.blocks, ip)),
    hasAddresses: all.some((rules) => rules.hasAddresses),
    hasHosts: all.some((rules) => rules.pattern !== undefined),
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

/**
 * A host as the WHATWG URL parser reads it, which is how clients and `new URL` read the same
 * text: IPv4 in any of its forms (`2130706433`, `127.1`, `0x7f.1`, `0177.0.0.1`) as the dotted
 * address, IPv6 in brackets compressed, names lower-cased and IDNA-mapped, percent-escapes
 * decoded; undefined for no valid host (and for text with userinfo, a path or a query).
 */
export function canonicalHost(raw: string): string | undefined {
  if (raw === '' || /[@/?#\\\s]/.test(raw)) return undefined;
  try {
    return new URL(`http://${raw}/`).hostname || undefined;
  } catch {
    return undefined;
  }
}

/** A host without the brackets of an IPv6 literal. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * Whether a request's host (and port: entries with a port match only it) matches a list: a
 * literal address (bracketed or not) by IP/CIDR or as text, a name by glob.
 */
export function targetMatches(list: Destinations, host: string, port?: number): boolean {
  const bare = plainAddress(unbracket(host));
  return isIP(bare) ? list.address(bare, port) || list.host(bare, port) : list.host(host, port);
}
