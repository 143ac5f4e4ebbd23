import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { NOT_PUBLIC_IPV4 } from '../../domain/private-addresses.js';
import { ServiceError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';

const run = promisify(execFile);

/** One of sandboxd's bridges, as the filter matches it. */
export interface FilteredBridge {
  /** The host interface (`com.docker.network.bridge.name`). */
  iface: string;
  /** The host's address on it (the network's gateway). */
  gateway: string;
  /** Internal: instances on it reach the exposed port and nothing else. */
  internal: boolean;
}

/** One instance's own rules: its address on its bridge and CIDR ranges (deny wins). */
export interface AddressRules {
  source: string;
  allow: string[];
  deny: string[];
}

/** The chain names of one network name (`sandboxd` -> SANDBOXD-EGRESS, SANDBOXD-RULES). */
export function chainsOf(networkName: string): { egress: string; rules: string } {
  const base = networkName.toUpperCase();
  return { egress: `${base}-EGRESS`, rules: `${base}-RULES` };
}

/**
 * The rules of sandboxd's chain, in the order they are matched, for packets that came in on one
 * of its bridges (the hooks jump here only for those), forwarded (from DOCKER-USER) or to the
 * host itself (from INPUT):
 * 1. answers of connections already let through (the relay's, the proxy's) go on;
 * 2. each sandbox's own rules (the RULES chain: its `deny`, then its `allow` ranges);
 * 3. the exposed port (the proxy port) on each bridge's own gateway address is accepted;
 * 4. anything else from an internal (proxy-mode) bridge is dropped;
 * 5. DNS (port 53) to the host's resolvers goes on from the other bridges: the engine's DNS in
 *    each container forwards names it does not know to them from the container's address;
 * 6. any address of the host itself (addrtype LOCAL: every interface's, the gateways' too) is dropped;
 * 7. every IPv4 range that is not public (`NOT_PUBLIC_IPV4`: RFC 1918, CGNAT, link-local and
 *    cloud metadata, the clouds' internal services, reserved...) is dropped;
 * 8. the rest (forwarded to the outside from an `open` bridge) returns to Docker's own rules.
 */
export function egressRules(chain: string, rulesChain: string, bridges: readonly FilteredBridge[], exposedPort: number | undefined, resolvers: readonly string[] = []): string[][] {
  const rules: string[][] = [
    ['-A', chain, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'RETURN'],
    ['-A', chain, '-j', rulesChain],
  ];
  if (exposedPort !== undefined) {
    for (const bridge of bridges) rules.push(['-A', chain, '-i', bridge.iface, '-d', `${bridge.gateway}/32`, '-p', 'tcp', '--dport', String(exposedPort), '-j', 'ACCEPT']);
  }
  for (const bridge of bridges.filter((b) => b.internal)) rules.push(['-A', chain, '-i', bridge.iface, '-j', 'DROP']);
  for (const bridge of bridges.filter((b) => !b.internal)) {
    for (const resolver of resolvers.filter((r) => !r.includes(':'))) {
      for (const protocol of ['udp', 'tcp']) rules.push(['-A', chain, '-i', bridge.iface, '-d', `${resolver}/32`, '-p', protocol, '--dport', '53', '-j', 'RETURN']);
    }
  }
  rules.push(['-A', chain, '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'DROP']);
  for (const cidr of NOT_PUBLIC_IPV4) rules.push(['-A', chain, '-d', cidr, '-j', 'DROP']);
  return rules;
}

/**
 * The RULES chain: every instance's deny ranges, then its allow ranges (IPv4 only: the networks
 * have no IPv6). A range with a port (`192.0.2.2/32:8080`) stands for that port alone, TCP and UDP.
 */
export function addressRules(chain: string, instances: readonly AddressRules[]): string[][] {
  const ipv4 = (entry: string) => /^\d+\.\d+\.\d+\.\d+\//.test(entry);
  const rule = (source: string, entry: string, verdict: string): string[][] => {
    const [, cidr = entry, port] = /^([^:]+\/\d+):(\d+)$/.exec(entry) ?? [];
    const base = ['-A', chain, '-s', `${source}/32`, '-d', cidr];
    if (port === undefined) return [[...base, '-j', verdict]];
    return ['tcp', 'udp'].map((protocol) => [...base, '-p', protocol, '--dport', port, '-j', verdict]);
  };
  const rules: string[][] = [];
  for (const { source, deny } of instances) for (const entry of deny.filter(ipv4)) rules.push(...rule(source, entry, 'DROP'));
  for (const { source, allow } of instances) for (const entry of allow.filter(ipv4)) rules.push(...rule(source, entry, 'ACCEPT'));
  return rules;
}

/** Where the engine's DNS answers inside each container of a user-defined network. */
export const ENGINE_DNS = '127.0.0.11';

/** iptables-restore input that empties (or makes) `chains` and appends `rules`, atomically. */
export function restoreInput(chains: readonly string[], rules: readonly string[][]): string {
  return ['*filter', ...chains.map((chain) => `:${chain} - [0:0]`), ...rules.map((rule) => rule.join(' ')), 'COMMIT', ''].join('\n');
}

/**
 * sandboxd's rules in the host's packet filter (iptables, filter table), for its own bridges
 * only: the chain `<NAME>-EGRESS`, jumped to from DOCKER-USER (forwarded traffic) and from INPUT
 * (traffic to the host itself) for packets that came in on one of those bridges, and the chain
 * `<NAME>-RULES` of each sandbox's own allow/deny ranges. It uses the iptables flavour Docker's
 * own chains are in (nf_tables or legacy). Rebuilt whole at each change (iptables-restore
 * --noflush replaces just these two chains, atomically); the jumps are added once. Left in place
 * at shutdown: sandboxes outlive the server, and so must their bounds.
 */
export class PacketFilter {
  private binary: string | undefined;
  private bridges: FilteredBridge[] = [];
  private resolvers: readonly string[] = [];
  private exposedPort: number | undefined;
  private readonly chains: { egress: string; rules: string };
  /** Serialises rebuilds: the last call's state wins. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    networkName: string,
    private readonly logger: Logger,
  ) {
    this.chains = chainsOf(networkName);
  }

  /**
   * Installs the chains and hooks for `bridges` (idempotent), DNS open to `resolvers` (the
   * addresses the engine's DNS forwards to). Every instance's own rules are cleared: the
   * service pushes those of the instances running now (`setAddressRules`).
   */
  async install(bridges: FilteredBridge[], resolvers: readonly string[] = []): Promise<void> {
    this.bridges = bridges;
    this.resolvers = resolvers;
    await this.serial(async () => {
      await this.restore([this.chains.egress, this.chains.rules], egressRules(this.chains.egress, this.chains.rules, this.bridges, this.exposedPort, this.resolvers));
      for (const bridge of this.bridges) {
        await this.hook('DOCKER-USER', bridge.iface);
        await this.hook('INPUT', bridge.iface);
      }
    });
    this.logger.info({ chain: this.chains.egress, bridges: bridges.map((b) => b.iface) }, 'packet filter installed');
  }

  /** Accepts `port` on each bridge's gateway (undefined: no port). */
  async expose(port: number | undefined): Promise<void> {
    this.exposedPort = port;
    await this.serial(() => this.restore([this.chains.egress], egressRules(this.chains.egress, this.chains.rules, this.bridges, port, this.resolvers)));
  }

  /** Replaces every instance's own rules. */
  async setAddressRules(instances: AddressRules[]): Promise<void> {
    await this.serial(() => this.restore([this.chains.rules], addressRules(this.chains.rules, instances)));
  }

  /** Removes the hooks of bridges `ifaces` and both chains (tests; `sandboxd` itself leaves them in place). */
  async uninstall(ifaces: readonly string[]): Promise<void> {
    await this.serial(async () => {
      const binary = await this.flavour();
      for (const iface of ifaces) {
        for (const from of ['DOCKER-USER', 'INPUT']) {
          while (await this.iptables(binary, ['-D', from, '-i', iface, '-j', this.chains.egress]).then(() => true, () => false));
        }
      }
      for (const chain of [this.chains.egress, this.chains.rules]) await this.iptables(binary, ['-F', chain]).catch(() => undefined);
      for (const chain of [this.chains.egress, this.chains.rules]) await this.iptables(binary, ['-X', chain]).catch(() => undefined);
    });
  }

  private serial(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Inserts `-i iface -j EGRESS` at the top of `from` unless it is there. */
  private async hook(from: string, iface: string): Promise<void> {
    const binary = await this.flavour();
    const rule = ['-i', iface, '-j', this.chains.egress];
    const present = await this.iptables(binary, ['-C', from, ...rule]).then(() => true, () => false);
    if (!present) await this.iptables(binary, ['-I', from, '1', ...rule]);
  }

  private async restore(chains: string[], rules: string[][]): Promise<void> {
    const binary = await this.flavour();
    await new Promise<void>((resolve, reject) => {
      const child = execFile(`${binary}-restore`, ['-w', '--noflush'], (err, _stdout, stderr) => {
        if (err) reject(filterError(`${binary}-restore`, stderr || err.message));
        else resolve();
      });
      child.stdin?.end(restoreInput(chains, rules));
    });
  }

  /**
   * Refuses, inside the network namespace of the container whose process is `pid`, every packet
   * to the engine's DNS (127.0.0.11, any port: the engine's listener has a port of its own behind
   * its DNAT of port 53). Entered from the host, with the flavour the engine's rules there use.
   */
  async closeEngineDns(pid: number): Promise<void> {
    const binary = await this.flavour();
    const rule = ['OUTPUT', '-d', `${ENGINE_DNS}/32`, '-j', 'REJECT'];
    try {
      await run('nsenter', [`--net=/proc/${pid}/ns/net`, '--', binary, '-w', '-I', ...rule]);
    } catch (err) {
      throw filterError(binary, `closing the engine's DNS to a sandbox: ${(err as { stderr?: string }).stderr || (err as Error).message}`);
    }
  }

  private async iptables(binary: string, args: string[]): Promise<void> {
    try {
      await run(binary, ['-w', ...args]);
    } catch (err) {
      throw filterError(binary, (err as { stderr?: string }).stderr || (err as Error).message);
    }
  }

  /**
   * `iptables` (what Docker runs too: nf_tables on current Debian) unless Docker's DOCKER-USER
   * chain is only in the legacy tables.
   */
  private async flavour(): Promise<string> {
    if (this.binary) return this.binary;
    const has = (binary: string) => run(binary, ['-w', '-S', 'DOCKER-USER']).then(() => true, () => false);
    if (await has('iptables')) this.binary = 'iptables';
    else if (await has('iptables-legacy')) this.binary = 'iptables-legacy';
    else throw filterError('iptables', "Docker's DOCKER-USER chain was found neither with iptables nor with iptables-legacy (is dockerd running with its iptables on, and sandboxd running as root?)");
    return this.binary;
  }
}

function filterError(binary: string, detail: string): ServiceError {
  return new ServiceError('BACKEND_UNAVAILABLE', `the host's packet filter cannot hold sandboxd's network rules (${binary}: ${detail.trim()}): sandboxd needs root and iptables (README, 'Security model')`);
}
