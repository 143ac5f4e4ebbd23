import type { Backend, InstanceRules } from '../../backends/backend.js';
import { defaultEgress, parseNetworkEntry, type EgressMode, type SandboxNetwork } from '../../domain/egress.js';
import type { Profile } from '../../domain/profiles.js';
import { badRequest, UnsupportedError } from '../../errors.js';
import type { NetworkInput, NetworkPatch } from '../../schemas/sandbox-schemas.js';
import type { SandboxRecord, SandboxRepository } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Departures } from '../support/departures.js';

/**
 * What a sandbox's network reaches, as the egress proxy reads it per request (its lookup
 * `(sandboxUuid) => sandboxEgress(record)`): the stored `network` field, or its profile's
 * default for a sandbox made without one.
 */
export function sandboxEgress(record: Pick<SandboxRecord, 'profile' | 'network'>): SandboxNetwork {
  return record.network ?? { egress: defaultEgress(record.profile), allow: [], deny: [] };
}

/**
 * The egress proxy's lookup (the interface between the proxy and the sandbox records): what the
 * sandbox with this uuid may reach, read at each request, so a PATCH applies at once;
 * undefined for a sandbox that does not exist (any more).
 */
export function egressLookup(repo: Pick<SandboxRepository, 'byUuid'>): (sandboxUuid: string) => Promise<SandboxNetwork | undefined> {
  return async (sandboxUuid) => {
    const record = await repo.byUuid(sandboxUuid);
    return record ? sandboxEgress(record) : undefined;
  };
}

/**
 * The `network` a create stores (null: the profile's default), checked against the profile
 * and the backend: a non-empty `allow` implies `proxy`; restrictive has no network; `open`
 * lists name addresses only (the packet filter sees no names); `none` has nothing to list.
 */
export function networkOfCreate(input: NetworkInput | undefined, profile: Profile, backend: Backend): SandboxNetwork | null {
  if (input === undefined) return null;
  const allow = input.allow ?? [];
  const deny = input.deny ?? [];
  const egress: EgressMode = input.egress ?? (allow.length > 0 ? 'proxy' : defaultEgress(profile));
  if (profile === 'restrictive' && egress !== 'none') {
    const field = input.egress === undefined ? 'network.allow' : 'network.egress';
    throw badRequest(`${field}: a restrictive sandbox has no network (egress none); egress '${egress}' needs the moderate or permissive profile`);
  }
  const network = { egress, allow, deny };
  checkLists(network);
  if (egress !== defaultEgress(profile)) {
    const capability = backend.capabilities.egress;
    if (!capability || !capability.modes.includes(egress)) throw new UnsupportedError(backend.name, `network.egress '${egress}' (enforced egress)`);
  }
  return network;
}

/** The network after a PATCH: new lists, the same egress (it decides the network the container is on). */
export function networkOfPatch(record: SandboxRecord, patch: NetworkPatch): SandboxNetwork {
  const current = sandboxEgress(record);
  if (patch.egress !== undefined && patch.egress !== current.egress) {
    throw badRequest(`network.egress: cannot change from '${current.egress}' to '${patch.egress}' on an existing sandbox (it decides the network its container is on): make a new sandbox`);
  }
  const network = { egress: current.egress, allow: patch.allow ?? current.allow, deny: patch.deny ?? current.deny };
  checkLists(network);
  return network;
}

function checkLists(network: SandboxNetwork): void {
  for (const list of ['allow', 'deny'] as const) {
    const entries = network[list];
    if (entries.length === 0) continue;
    if (network.egress === 'none') throw badRequest(`network.${list}: egress none reaches nothing, so it takes no ${list} list (use egress proxy or open)`);
    if (network.egress !== 'open') continue;
    const index = entries.findIndex((entry) => typeOf(entry) === 'host');
    if (index >= 0) {
      throw badRequest(`network.${list}[${index}]: '${entries[index]}' is a host name; with egress open only addresses and CIDR ranges apply (the packet filter sees no names): use egress proxy to list host names`);
    }
  }
}

const typeOf = (entry: string) => {
  const parsed = parseNetworkEntry(entry);
  return typeof parsed === 'string' ? 'invalid' : parsed.kind;
};

/** The CIDR form of a list's address entries, with their port (`10.1.2.3` -> `10.1.2.3/32`, `10.1.2.3:8080` -> `10.1.2.3/32:8080`). */
function cidrsOf(entries: string[]): string[] {
  return entries.flatMap((entry) => {
    const parsed = parseNetworkEntry(entry);
    if (typeof parsed === 'string' || parsed.kind !== 'cidr') return [];
    return [parsed.port === undefined ? parsed.cidr : `${parsed.cidr}:${parsed.port}`];
  });
}

/**
 * Every running `open` sandbox's own address rules, pushed whole to the backend's packet
 * filter (`EgressCapability.setRules`) after each change that can move them: a create, start,
 * stop, removal (once the engine has removed the container) or PATCH of `network`, and at
 * server start. Rules follow addresses, which a
 * container gets anew at each start, so they are rebuilt rather than edited.
 */
export class NetworkRules {
  private applied = '[]';

  constructor(
    private readonly repo: SandboxRepository,
    private readonly departures: Pick<Departures, 'records'>,
    private readonly backend: Backend,
    private readonly logger: Logger,
  ) {}

  /** Pushes the rules; errors propagate (a PATCH must say its rules were not applied). */
  async sync(): Promise<void> {
    const capability = this.backend.capabilities.egress;
    if (!capability) return;
    const rules: InstanceRules[] = [];
    // A removed sandbox's container keeps its rules until the engine has removed it.
    for (const record of [...(await this.repo.all()), ...this.departures.records()]) {
      const network = sandboxEgress(record);
      if (record.status !== 'running' || !record.backend_id || network.egress !== 'open') continue;
      const allow = cidrsOf(network.allow);
      const deny = cidrsOf(network.deny);
      if (allow.length > 0 || deny.length > 0) rules.push({ id: record.backend_id, allow, deny });
    }
    const wanted = JSON.stringify(rules);
    // Nothing listed before or now: no packet-filter call at each create of an unlisted sandbox.
    if (wanted === '[]' && this.applied === '[]') return;
    await capability.setRules(rules);
    this.applied = wanted;
  }

  /** `sync` where a failure must not fail the operation that caused it (logged instead). */
  async syncQuietly(): Promise<void> {
    await this.sync().catch((err: unknown) => this.logger.error({ err }, "could not apply the sandboxes' address rules to the packet filter"));
  }

  /**
   * `syncQuietly` after a sandbox was made, started, stopped or removed: only when its own
   * network lists addresses or rules are applied, so that the common create and remove read
   * no table and call no packet filter.
   */
  async syncAfter(record: Pick<SandboxRecord, 'profile' | 'network'>): Promise<void> {
    const network = sandboxEgress(record);
    const listed = network.egress === 'open' && (cidrsOf(network.allow).length > 0 || cidrsOf(network.deny).length > 0);
    if (listed || this.applied !== '[]') await this.syncQuietly();
  }
}
