import { existsSync } from 'node:fs';
import { BlockList } from 'node:net';
import { networkInterfaces } from 'node:os';
import { addRange, inList, NOT_PUBLIC_RANGES } from '../../domain/private-addresses.js';

/**
 * The addresses the proxy refuses by default, unless an `allow` IP/CIDR names them: every one
 * that is not public (`NOT_PUBLIC_RANGES`, the classification clones and the packet filter
 * share: loopback, RFC 1918, CGNAT, IPv6 ULA, link-local, the clouds' internal services,
 * multicast, reserved), the host's own addresses, and the sandbox networks' ranges
 * (`sandboxRanges`, CIDRs). The host's addresses are read again at most every 30 s (interfaces
 * come and go with Docker networks).
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
    const add = (entry: string) => addRange(list, entry);
    NOT_PUBLIC_RANGES.forEach(add);
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
