import { existsSync } from 'node:fs';
import { BlockList } from 'node:net';
import { networkInterfaces } from 'node:os';
import { cidrOf, inList } from '../../domain/destinations.js';

/** Addresses no sandbox reaches through the proxy unless an `allow` IP/CIDR names them. */
const ALWAYS_INTERNAL: readonly string[] = [
  '0.0.0.0/8', // "this host": connecting to 0.0.0.0 reaches the host's loopback
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local: cloud metadata services
  '224.0.0.0/4',
  '255.255.255.255/32',
  '::/128',
  '::1/128',
  'fe80::/10',
  'ff00::/8',
];

/**
 * The addresses the proxy refuses by default: loopback, link-local, the host's own addresses,
 * and the sandbox networks' ranges (`sandboxRanges`, CIDRs). The host's addresses are read
 * again at most every 30 s (interfaces come and go with Docker networks).
 */
export class InternalAddresses {
  private list: BlockList | undefined;
  private readAt = 0;

  constructor(private readonly sandboxRanges: () => readonly string[] = dockerBridgeRanges) {}

  has(ip: string): boolean {
    if (!this.list || Date.now() - this.readAt > 30_000) {
      this.list = this.build();
      this.readAt = Date.now();
    }
    return inList(this.list, ip);
  }

  private build(): BlockList {
    const list = new BlockList();
    const add = (entry: string) => {
      const cidr = cidrOf(entry);
      if (cidr) list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    };
    ALWAYS_INTERNAL.forEach(add);
    for (const addresses of Object.values(networkInterfaces())) {
      for (const a of addresses ?? []) add(a.address.replace(/%.*$/s, ''));
    }
    this.sandboxRanges().forEach(add);
    return list;
  }
}

/**
 * The ranges of the host's bridge interfaces (`docker0`, `br-*`, sandboxd's own networks: every
 * interface Linux lists under /sys/class/net/<name>/bridge), where containers live: the
 * default when the network setup names no sandbox ranges.
 */
export function dockerBridgeRanges(): string[] {
  const ranges: string[] = [];
  for (const [name, addresses] of Object.entries(networkInterfaces())) {
    const bridge = name === 'docker0' || name.startsWith('br-') || existsSync(`/sys/class/net/${name}/bridge`);
    if (!bridge) continue;
    for (const a of addresses ?? []) if (a.cidr) ranges.push(a.cidr);
  }
  return ranges;
}
