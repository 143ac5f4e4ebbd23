import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { isNotPublic, plainAddress } from '../domain/private-addresses.js';

/**
 * Where a `source_url` clone may connect. The host is resolved once; every address it resolves
 * to must be a public one (`isNotPublic`, the classification every egress path shares: not
 * loopback, link-local, private, CGNAT, multicast, reserved...) unless the operator allows the
 * host, its address or a range holding it (`--source-allowed-hosts`). The clone then connects to the address that was checked, so a DNS
 * answer that changes between the check and the connection (DNS rebinding) changes nothing.
 */

/** A resolved address as `net` names its family. */
const familyOf = (address: string): 'ipv4' | 'ipv6' => (isIP(address) === 6 ? 'ipv6' : 'ipv4');

/** The operator's exceptions: host names, addresses and CIDR ranges (`10.0.0.0/8`, `fd00::/8`). */
export class AllowedHosts {
  private readonly names = new Set<string>();
  private readonly ranges = new BlockList();

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
      if (!entry) continue;
      const [address = '', prefix] = entry.split('/');
      if (isIP(address)) {
        const family = familyOf(address);
        if (prefix === undefined) this.ranges.addAddress(address, family);
        else this.ranges.addSubnet(address, Number(prefix), family);
      } else {
        this.names.add(entry);
      }
    }
  }

  /** Whether the operator allows this host name or this address. */
  allows(host: string, address: string): boolean {
    if (this.names.has(host.toLowerCase())) return true;
    const plain = plainAddress(address);
    return isIP(plain) !== 0 && this.ranges.check(plain, familyOf(plain));
  }
}

/** Every address a host name resolves to (an address resolves to itself). */
export type Resolver = (host: string) => Promise<string[]>;

export const resolveHost: Resolver = async (host) => {
  const plain = host.replace(/^\[(.*)\]$/, '$1');
  if (isIP(plain)) return [plain];
  return (await lookup(plain, { all: true, verbatim: true })).map((entry) => entry.address);
};

/** Why the destination is refused (for the log only), or the address to connect to. */
export type Destination = { address: string } | { refused: string };

/**
 * The address a clone of `host` connects to: the first it resolves to, provided that every
 * address is public or allowed. A host that resolves to nothing is refused.
 */
export async function checkDestination(host: string, allowed: AllowedHosts, resolve: Resolver = resolveHost): Promise<Destination> {
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch (err) {
    return { refused: `${host} does not resolve: ${(err as Error).message}` };
  }
  const [first] = addresses;
  if (first === undefined) return { refused: `${host} resolves to no address` };
  const blocked = addresses.find((address) => isNotPublic(address) && !allowed.allows(host, address));
  if (blocked) return { refused: `${host} resolves to ${blocked}, which is not a public address (allow it with --source-allowed-hosts)` };
  return { address: first };
}
