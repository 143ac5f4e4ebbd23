import { BlockList, isIP } from 'node:net';

/**
 * Addresses that are not the public internet: the one classification every path that connects
 * on a sandbox's behalf refuses unless an allow entry names the address (the egress proxy's
 * resolution and CONNECT, the packet filter of `open` sandboxes, `source_url` clones). The host
 * itself, its networks (RFC 1918, CGNAT, IPv6 ULA), link-local (cloud metadata), the clouds'
 * internal services, multicast, and what the internet does not route (documentation,
 * benchmarking, reserved, translation prefixes).
 */
export const NOT_PUBLIC_RANGES: readonly string[] = [
  '0.0.0.0/8', // "this host": connecting to 0.0.0.0 reaches the host's loopback
  '10.0.0.0/8',
  '100.64.0.0/10', // CGNAT (and Alibaba Cloud's metadata, 100.100.100.200)
  '127.0.0.0/8',
  '168.63.129.16/32', // Azure's wire server (DHCP, DNS, health, agent configuration)
  '169.254.0.0/16', // link-local: the metadata service of every large cloud
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4', // reserved, 255.255.255.255 included
  '::/128',
  '::1/128',
  '64:ff9b::/96', // NAT64: would reach any IPv4 address, private ones too
  '64:ff9b:1::/48',
  '100::/64',
  '2001::/23',
  '2001:db8::/32',
  '2002::/16', // 6to4: embeds an IPv4 address
  'fc00::/7', // unique local addresses (fd00:ec2::254 is AWS's metadata service)
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
];

/** The IPv4 ranges of `NOT_PUBLIC_RANGES` (what a packet filter of IPv4 networks drops). */
export const NOT_PUBLIC_IPV4: readonly string[] = NOT_PUBLIC_RANGES.filter((cidr) => !cidr.includes(':'));

/** Adds a CIDR (or a bare address) to a BlockList; false when it is none. */
export function addRange(list: BlockList, entry: string): boolean {
  const [address = '', prefixText, ...rest] = entry.split('/');
  const plain = plainAddress(address);
  const family = isIP(plain);
  if (family === 0 || rest.length > 0) return false;
  const max = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return false;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return false;
  list.addSubnet(plain, prefix, family === 4 ? 'ipv4' : 'ipv6');
  return true;
}

const notPublic = new BlockList();
for (const cidr of NOT_PUBLIC_RANGES) addRange(notPublic, cidr);

/**
 * An IPv4-mapped IPv6 address as the IPv4 address it is, in either spelling
 * (`::ffff:127.0.0.1`, `::ffff:7f00:1`, as WHATWG writes it); any other address as given.
 */
export function plainAddress(ip: string): string {
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  if (dotted) return dotted;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (!hex) return ip;
  const high = parseInt(hex[1] ?? '0', 16);
  const low = parseInt(hex[2] ?? '0', 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** Whether an address is in a BlockList (an IPv4-mapped one as the IPv4 address); false for no address. */
export function inList(list: BlockList, ip: string): boolean {
  const plain = plainAddress(ip);
  const family = isIP(plain);
  return family !== 0 && list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
}

/** Whether an address is not a public one (anything that is no address counts as not public). */
export function isNotPublic(ip: string): boolean {
  const plain = plainAddress(ip);
  if (isIP(plain) === 0) return true;
  // A mapped address in a form `plainAddress` does not read: refuse rather than guess.
  if (/^::ffff:/i.test(plain)) return true;
  return inList(notPublic, plain);
}
