import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type Docker from 'dockerode';
import { ServiceError } from '../../errors.js';
import { firstHostAddress } from './docker-gateway.js';
import { dockerStatus } from './docker-errors.js';

/** The label on the networks sandboxd makes; its value is the network name setting. */
export const NETWORK_LABEL = 'sandboxd.network';

/** One of sandboxd's networks, as the engine reports it. */
export interface OwnNetwork {
  /** The Docker network's name (`sandboxd`, `sandboxd-proxy`). */
  name: string;
  /** The host's bridge interface. */
  iface: string;
  subnet: string;
  gateway: string;
  internal: boolean;
}

export interface OwnNetworks {
  open: OwnNetwork;
  proxy: OwnNetwork;
}

/**
 * The two networks of a network name: `<name>` for `open` egress (a bridge with
 * inter-container traffic off, so sandboxes reach no other sandbox) and `<name>-proxy` for
 * `proxy` egress (the same, internal: the engine routes nothing out of it). Bridges are named
 * `<name>-o` and `<name>-p`; the engine picks the subnets from its address pools
 * (`default-address-pools` in daemon.json) unless they exist already.
 */
export function networkSpecs(name: string): { open: NetworkSpec; proxy: NetworkSpec } {
  return {
    open: { name, iface: `${name}-o`, internal: false },
    proxy: { name: `${name}-proxy`, iface: `${name}-p`, internal: true },
  };
}

interface NetworkSpec {
  name: string;
  iface: string;
  internal: boolean;
}

interface InspectedNetwork {
  Internal?: boolean;
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] | null };
  Options?: Record<string, string> | null;
  Labels?: Record<string, string> | null;
}

/** Makes the networks where missing (idempotent, also when another server makes them at once) and reads them back. */
export async function ensureNetworks(docker: Docker, name: string): Promise<OwnNetworks> {
  const specs = networkSpecs(name);
  return { open: await ensureNetwork(docker, specs.open, name), proxy: await ensureNetwork(docker, specs.proxy, name) };
}

async function ensureNetwork(docker: Docker, spec: NetworkSpec, setting: string): Promise<OwnNetwork> {
  let info = await inspect(docker, spec.name);
  if (!info) {
    await docker
      .createNetwork({
        Name: spec.name,
        Driver: 'bridge',
        CheckDuplicate: true,
        Internal: spec.internal,
        Labels: { [NETWORK_LABEL]: setting, 'sandboxd.managed': 'true' },
        Options: { 'com.docker.network.bridge.enable_icc': 'false', 'com.docker.network.bridge.name': spec.iface },
      })
      // 409: made meanwhile by another server of this host.
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 409) throw err;
      });
    info = await inspect(docker, spec.name);
  }
  if (!info) throw new ServiceError('BACKEND_UNAVAILABLE', `Docker network '${spec.name}' could not be made`);
  return readNetwork(spec, info);
}

/** Checks that an existing network is one sandboxd made with the settings its rules rely on. */
function readNetwork(spec: NetworkSpec, info: InspectedNetwork): OwnNetwork {
  const problem = (what: string) =>
    new ServiceError('BACKEND_UNAVAILABLE', `Docker network '${spec.name}' ${what}: remove it (docker network rm ${spec.name}) or choose another [network].name`);
  if (info.Labels?.[NETWORK_LABEL] === undefined) throw problem('exists but was not made by sandboxd');
  if (info.Options?.['com.docker.network.bridge.name'] !== spec.iface || info.Options?.['com.docker.network.bridge.enable_icc'] !== 'false') {
    throw problem(`is not a bridge named ${spec.iface} with inter-container traffic off`);
  }
  if ((info.Internal ?? false) !== spec.internal) throw problem(spec.internal ? 'is not internal' : 'is internal');
  const config = (info.IPAM?.Config ?? []).find((c) => c.Subnet && !c.Subnet.includes(':'));
  if (!config?.Subnet) throw problem('has no IPv4 subnet');
  return { name: spec.name, iface: spec.iface, subnet: config.Subnet, gateway: config.Gateway ?? firstHostAddress(config.Subnet), internal: spec.internal };
}

async function inspect(docker: Docker, name: string): Promise<InspectedNetwork | undefined> {
  try {
    return (await docker.getNetwork(name).inspect()) as InspectedNetwork;
  } catch (err) {
    if (dockerStatus(err) === 404) return undefined;
    throw err;
  }
}

/** Removes the networks of a network name (tests); networks still in use stay. */
export async function removeNetworks(docker: Docker, name: string): Promise<void> {
  for (const spec of Object.values(networkSpecs(name))) {
    await docker
      .getNetwork(spec.name)
      .remove()
      .catch(() => undefined);
  }
}

/** Where the engine's and the host's DNS settings are read from (tests give their own). */
export interface ResolverFiles {
  daemonJson: string;
  resolvConf: readonly string[];
}

const RESOLVER_FILES: ResolverFiles = { daemonJson: '/etc/docker/daemon.json', resolvConf: ['/etc/resolv.conf', '/run/systemd/resolve/resolv.conf'] };

/**
 * The DNS servers the engine's DNS in each container forwards names it does not know to, from
 * the container's own address (so the packet filter must let port 53 to them through): the
 * daemon's `dns` setting, else the host's nameservers (/etc/resolv.conf, and systemd-resolved's
 * upstream file where the first lists only its loopback stub). Loopback ones are left out (the
 * engine reaches those from the host itself); IPv4 and IPv6 alike.
 */
export function engineResolvers(files: ResolverFiles = RESOLVER_FILES): string[] {
  const configured = readJson(files.daemonJson)?.dns;
  const found = Array.isArray(configured) ? configured.filter((s): s is string => typeof s === 'string') : files.resolvConf.flatMap(nameservers);
  return [...new Set(found.map((s) => s.trim()).filter((s) => isIP(s) !== 0 && !/^127\.|^::1$/.test(s)))];
}

function nameservers(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  return [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => (m[1] ?? '').replace(/%.*$/s, ''));
}

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
