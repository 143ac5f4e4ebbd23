import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { addRange, inList } from '../../../domain/private-addresses.js';
import { badRequest, ServiceError } from '../../../errors.js';
import { InternalAddresses } from '../../egress/internal-addresses.js';
import { hostAllowed } from './store-credentials.js';

/** Every address a host name resolves to (an address resolves to itself). */
export type StoreResolver = (host: string) => Promise<string[]>;

const resolveAll: StoreResolver = async (host) => {
  if (isIP(host)) return [host];
  return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
};

/** What decides whether an address is internal: the egress proxy's classification. */
export type InternalCheck = Pick<InternalAddresses, 'has'>;

/**
 * Where an external store may connect (`[stores].allowed_hosts`, issue 25 item 17). A host
 * must match one of the globs; and when it is, or resolves to, an internal address (loopback,
 * link-local, private, this host's own and its sandbox networks: the egress proxy's
 * classification, `InternalAddresses`), an entry must name it: the host itself without a
 * wildcard, its address, or a CIDR holding it. `*` alone never opens them, so the default
 * list cannot be used to probe the server's loopback ports through store errors. The store
 * then connects to the address that was checked (a DNS answer that changes afterwards changes
 * nothing).
 */
export class StoreDestinations {
  private readonly globs: string[] = [];
  private readonly names = new Set<string>();
  private readonly ranges = new BlockList();

  constructor(
    private readonly entries: readonly string[],
    private readonly internal: InternalCheck = new InternalAddresses(),
    private readonly resolve: StoreResolver = resolveAll,
  ) {
    for (const entry of entries) {
      const glob = /[*?]/.test(entry);
      const range = !glob && addRange(this.ranges, entry);
      if (!range) this.globs.push(entry);
      if (!range && !glob) this.names.add(entry.toLowerCase());
    }
  }

  /**
   * The address a store of `host` connects to; 400 naming `field` when the host is not among
   * the allowed ones or is an internal address no entry names. A name that does not resolve
   * passes when `unresolved` is `'pass'` (a create or patch: it is checked again at connect)
   * and is 503 STORE_UNAVAILABLE otherwise (the driver must not look it up again itself).
   */
  async check(host: string, field: string, unresolved: 'pass' | 'fail' = 'fail'): Promise<string> {
    const plain = host.replace(/^\[(.*)\]$/, '$1');
    const literal = isIP(plain) !== 0;
    if (!hostAllowed(plain, this.globs) && !(literal && inList(this.ranges, plain))) {
      throw badRequest(`${field}: '${host}' is not among the hosts stores may connect to (--store-allowed-hosts: ${this.entries.join(', ') || 'none'})`);
    }
    let addresses: string[] = [];
    let reason = 'no address';
    try {
      addresses = await this.resolve(plain);
    } catch (err) {
      reason = typeof (err as { code?: unknown }).code === 'string' ? String((err as { code: string }).code) : 'no address';
    }
    const [first] = addresses;
    if (first === undefined) {
      if (unresolved === 'pass') return plain;
      throw new ServiceError('STORE_UNAVAILABLE', `${field}: '${host}' does not resolve (${reason})`);
    }
    const internal = addresses.find((address) => this.internal.has(address) && !this.names.has(plain.toLowerCase()) && !inList(this.ranges, address));
    if (internal !== undefined) {
      const what = internal === plain ? `'${host}'` : `'${host}' (${internal})`;
      throw badRequest(
        `${field}: ${what} is an internal address (loopback, link-local, private, or this server's own); ` +
          `stores reach one only when --store-allowed-hosts names it (the host, its address or a CIDR holding it), '*' does not`,
      );
    }
    return first;
  }
}
