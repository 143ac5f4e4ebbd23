import { writeFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { EgressMode } from '../../domain/egress.js';
import type { Logger } from '../../telemetry/logger.js';
import type { EgressCapability, InstanceRules, InstanceState } from '../backend.js';
import { engineResolvers, ensureNetworks, networkSpecs, removeNetworks, type OwnNetworks } from './docker-networks.js';
import { LABEL } from './container-spec.js';
import { PacketFilter } from './packet-filter.js';

/** How long to wait before listening to the engine's events again after the stream ended. */
const EVENTS_RETRY_MS = 1_000;

/**
 * Enforced egress on Docker: sandboxd's own networks (docker-networks.ts) and its rules in the
 * host's packet filter (packet-filter.ts), both made once, before the first sandbox joins a
 * network (a failure is retried at the next use). README, 'Security model', says what each
 * mode reaches; docs/decisions.md why internal networks and iptables.
 *
 * Address rules follow their containers: while any are set, the engine's container events are
 * watched, and a container that dies or starts (also by `docker stop`/`kill`/`start` behind
 * sandboxd's back) has the rules rebuilt from the addresses the containers hold now, at once:
 * an address a stopped sandbox held, which the engine may give the next container, keeps none
 * of its rules.
 */
export class DockerEgress implements EgressCapability {
  readonly modes: readonly EgressMode[] = ['open', 'proxy', 'none'];
  private readonly filter: PacketFilter;
  private preparing: Promise<OwnNetworks> | undefined;
  /** The rules last set, by container: rebuilt on each container event. */
  private rules: InstanceRules[] = [];
  /** Rebuilds run one after another, each from the rules and addresses of its own time. */
  private applying: Promise<void> = Promise.resolve();
  private events: Readable | undefined;
  private listening = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  /** The resolvers a sandbox asks instead of the engine's DNS (read once). */
  private resolvers: string[] | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly networkName: string,
    private readonly inspect: (id: string) => Promise<InstanceState | null>,
    private readonly logger: Logger,
  ) {
    this.filter = new PacketFilter(networkName, logger);
  }

  /** The networks, made and filtered on first use. */
  networks(): Promise<OwnNetworks> {
    this.preparing ??= (async () => {
      const networks = await ensureNetworks(this.docker, this.networkName);
      const bridges = Object.values(networks).map((n) => ({ iface: n.iface, gateway: n.gateway, internal: n.internal }));
      await this.filter.install(bridges, engineResolvers());
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

  /** Instances that do not run (no address) have no rules: they are rebuilt when one starts or dies. */
  async setRules(rules: InstanceRules[]): Promise<void> {
    await this.networks();
    this.rules = rules;
    if (rules.length > 0) this.watch();
    await this.apply();
  }

  /** Stops watching the engine's events (the rules stay in the packet filter). */
  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
    const events = this.events;
    this.events = undefined;
    events?.destroy();
  }

  /** Rebuilds the RULES chain from the rules last set and the addresses their containers hold now. */
  private apply(): Promise<void> {
    const next = this.applying.then(async () => {
      const addressed = await Promise.all(
        this.rules.map(async (rule) => {
          const state = await this.inspect(rule.id);
          return state?.ip ? { source: state.ip, allow: rule.allow, deny: rule.deny } : undefined;
        }),
      );
      await this.filter.setAddressRules(addressed.filter((rule) => rule !== undefined));
    });
    this.applying = next.catch(() => undefined);
    return next;
  }

  /** Listens to the `die` and `start` events of sandboxd's containers while rules are set. */
  private watch(): void {
    if (this.listening || this.retry || this.closed) return;
    this.listening = true;
    const filters = { type: ['container' as const], event: ['die', 'start'], label: [`${LABEL.managed}=true`] };
    const rebuild = () =>
      void this.apply().catch((err: unknown) => this.logger.error({ err }, "could not rebuild the sandboxes' address rules after a container event"));
    this.docker.getEvents({ filters }).then(
      (raw) => {
        const stream = raw as Readable;
        if (this.closed) {
          stream.destroy();
          return;
        }
        this.events = stream;
        // Containers that started or died while no stream listened (a reconnect).
        rebuild();
        let buffered = '';
        stream.on('data', (chunk: Buffer) => {
          buffered += chunk.toString('utf8');
          const lines = buffered.split('\n');
          buffered = lines.pop() ?? '';
          if (lines.some((line) => line.trim() !== '') && this.rules.length > 0) rebuild();
        });
        const ended = () => {
          if (this.events !== stream) return;
          this.events = undefined;
          this.relisten();
        };
        stream.on('end', ended);
        stream.on('close', ended);
        stream.on('error', ended);
      },
      (err: unknown) => {
        this.logger.warn({ err }, "cannot watch the engine's container events; retrying");
        this.relisten();
      },
    );
  }

  /** After the event stream ended (or could not open): listens again in a while, while rules are set. */
  private relisten(): void {
    this.listening = false;
    if (this.closed || this.rules.length === 0) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.watch();
    }, EVENTS_RETRY_MS);
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

  /**
   * Sandboxes do not find each other through the engine's DNS. On sandboxd's networks the engine
   * answers, at 127.0.0.11 inside every container, the names of the other containers on the
   * network (and reverse lookups of their addresses). A started container therefore gets a
   * resolv.conf (the engine's file on the host, which the container mounts read-only) naming
   * the host's resolvers, which the packet filter lets it reach, and a rule in its own network
   * namespace that refuses 127.0.0.11 (no profile has CAP_NET_ADMIN to lift it). The engine
   * writes its file anew and makes a new namespace at each start: this runs after each one.
   * On the `proxy` network no resolver is reachable (the proxy resolves): its file names none,
   * so a lookup fails at once instead of after the C library's timeouts.
   * Under gVisor, 127.0.0.11 is gVisor's own loopback, where nothing answers. Without a resolver
   * off the host's loopback to name, the engine's DNS stays (and says so in the log).
   */
  async isolateDns(info: Docker.ContainerInspectInfo): Promise<void> {
    if (!info.State.Running || !info.State.Pid || Object.keys(info.NetworkSettings.Networks ?? {}).length === 0) return;
    if (info.HostConfig.NetworkMode === 'none' || info.HostConfig.NetworkMode === 'host') return;
    if (this.resolvers === undefined) {
      this.resolvers = engineResolvers().filter((resolver) => !resolver.includes(':'));
      if (this.resolvers.length === 0) this.logger.warn("the host names no DNS resolver off its loopback: sandboxes use the engine's DNS, where they can look up each other's names");
    }
    if (this.resolvers.length === 0) return;
    const proxied = Object.keys(info.NetworkSettings.Networks ?? {}).includes((await this.networks()).proxy.name);
    if (info.ResolvConfPath) await writeFile(info.ResolvConfPath, resolvConf(proxied ? [] : this.resolvers));
    if (info.HostConfig.Runtime !== 'runsc') await this.filter.closeEngineDns(info.State.Pid);
  }

  /** Removes the rules and the networks (tests with a network name of their own). */
  async teardown(): Promise<void> {
    await this.filter.uninstall(Object.values(networkSpecs(this.networkName)).map((spec) => spec.iface));
    await removeNetworks(this.docker, this.networkName);
    this.preparing = undefined;
  }
}

/** A sandbox's resolv.conf: the host's resolvers (at most the three the C library reads), or none. */
export function resolvConf(resolvers: readonly string[]): string {
  const lines = resolvers.slice(0, 3).map((resolver) => `nameserver ${resolver}`);
  return `# sandboxd: the host's resolvers; the engine's DNS (127.0.0.11) is closed to sandboxes\n${lines.join('\n')}\n`;
}
