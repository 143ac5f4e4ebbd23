import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a `source_url` clone may connect. The host is resolved once; every address it resolves
 * to must be a public one (not loopback, link-local, private, CGNAT, multicast, reserved...)
 * unless the operator allows the host, its address or a range holding it
 * (`--source-allowed-hosts`). The clone then connects to the address that was checked, so a DNS
 * answer that changes between the check and the connection (DNS rebinding) changes nothing.
 */

/** Ranges no clone reaches unless allowed: the host itself, its networks, and what is not routed. */
const NOT_PUBLIC: Array<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.88.99.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001::', 23, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  ['2002::', 16, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['fec0::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

const notPublic = new BlockList();
for (const [address, prefix, family] of NOT_PUBLIC) notPublic.addSubnet(address, prefix, family);

/** A resolved address as `net` names its family. */
const familyOf = (address: string): 'ipv4' | 'ipv6' => (isIP(address) === 6 ? 'ipv6' : 'ipv4');

/** The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:a.b.c.d), else the address itself. */
function unmapped(address: string): string {
  return /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;
}

/** Whether an address is one a clone may not reach unless allowed. */
export function isNotPublic(address: string): boolean {
  const plain = unmapped(address);
  if (isIP(plain) === 0) return true;
  if (familyOf(plain) === 'ipv6' && /^::ffff:/i.test(plain)) return true;
  return notPublic.check(plain, familyOf(plain));
}

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
    const plain = unmapped(address);
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
