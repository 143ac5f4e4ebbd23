import type Docker from 'dockerode';
import type { EgressMode } from '../../domain/egress.js';
import type { Logger } from '../../telemetry/logger.js';
import type { EgressCapability, InstanceRules, InstanceState } from '../backend.js';
import { ensureNetworks, networkSpecs, removeNetworks, type OwnNetworks } from './docker-networks.js';
import { PacketFilter } from './packet-filter.js';

/**
 * Enforced egress on Docker: sandboxd's own networks (docker-networks.ts) and its rules in the
 * host's packet filter (packet-filter.ts), both made once, before the first sandbox joins a
 * network (a failure is retried at the next use). README, 'Security model', says what each
 * mode reaches; docs/decisions.md why internal networks and iptables.
 */
export class DockerEgress implements EgressCapability {
  readonly modes: readonly EgressMode[] = ['open', 'proxy', 'none'];
  private readonly filter: PacketFilter;
  private preparing: Promise<OwnNetworks> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly networkName: string,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
    logger: Logger,
  ) {
    this.filter = new PacketFilter(networkName, logger);
  }

  /** The networks, made and filtered on first use. */
  networks(): Promise<OwnNetworks> {
    this.preparing ??= (async () => {
      const networks = await ensureNetworks(this.docker, this.networkName);
      await this.filter.install(Object.values(networks).map((n) => ({ iface: n.iface, gateway: n.gateway, internal: n.internal })));
      return networks;
    })().catch((err: unknown) => {
      this.preparing = undefined;
      throw err;
    });
    return this.preparing;
  }

  async gatewayAddress(egress: 'open' | 'proxy' = 'open'): Promise<string> {
    return (await this.networks())[egress].gateway;
  }

  async exposePort(port: number | undefined): Promise<void> {
    await this.networks();
    await this.filter.expose(port);
  }

  /** Instances that do not run (no address) have no rules: `setRules` runs again at their start. */
  async setRules(rules: InstanceRules[]): Promise<void> {
    await this.networks();
    const addressed = await Promise.all(
      rules.map(async (rule) => {
        const state = await this.inspect(rule.id);
        return state?.ip ? { source: state.ip, allow: rule.allow, deny: rule.deny } : undefined;
      }),
    );
    await this.filter.setAddressRules(addressed.filter((rule) => rule !== undefined));
  }

  async ranges(): Promise<string[]> {
    return Object.values(await this.networks()).map((network) => network.subnet);
  }

  /**
   * Moves a stopped container made before sandboxd had networks of its own off Docker's default
   * bridge (where sandboxes reach each other and the host) onto the `open` network, at its next
   * start; containers on any other network, or none, are left as they are.
   */
  async adopt(info: Docker.ContainerInspectInfo): Promise<void> {
    const attached = Object.keys(info.NetworkSettings.Networks ?? {});
    if (info.State.Running || attached.length !== 1 || attached[0] !== 'bridge') return;
    const open = (await this.networks()).open.name;
    await this.docker.getNetwork('bridge').disconnect({ Container: info.Id });
    await this.docker.getNetwork(open).connect({ Container: info.Id });
  }

  /** Removes the rules and the networks (tests with a network name of their own). */
  async teardown(): Promise<void> {
    await this.filter.uninstall(Object.values(networkSpecs(this.networkName)).map((spec) => spec.iface));
    await removeNetworks(this.docker, this.networkName);
    this.preparing = undefined;
  }
}
