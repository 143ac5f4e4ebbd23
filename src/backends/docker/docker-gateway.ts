import { networkInterfaces } from 'node:os';
import type Docker from 'dockerode';
import { ServiceError } from '../../errors.js';

/** What the engine reports of a bridge network (the fields read here). */
interface BridgeNetwork {
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] | null };
  Options?: Record<string, string> | null;
}

/**
 * The host's IPv4 address on Docker's default bridge network: the address sandboxes reach the
 * host at, and where the server listens for them. The engine names it in the network's IPAM
 * config when it was set explicitly; the default bridge of Docker 20.10 names only the subnet,
 * so the address of the bridge's interface (docker0) on this host is read instead, and failing
 * that (Node lists only interfaces that are up with a carrier: docker0 has none while no
 * container runs) the first host address of the subnet, the address Docker gives the bridge.
 */
export async function bridgeGateway(docker: Docker): Promise<string> {
  const network = (await docker.getNetwork('bridge').inspect()) as BridgeNetwork;
  const config = (network.IPAM?.Config ?? []).filter((c) => c.Subnet && !c.Subnet.includes(':'));
  const explicit = config.find((c) => c.Gateway)?.Gateway;
  if (explicit) return explicit;
  const bridgeName = network.Options?.['com.docker.network.bridge.name'];
  const onInterface = bridgeName ? networkInterfaces()[bridgeName]?.find((a) => a.family === 'IPv4')?.address : undefined;
  if (onInterface) return onInterface;
  const subnet = config[0]?.Subnet;
  if (!subnet) throw new ServiceError('BACKEND_UNAVAILABLE', "Docker's bridge network has no IPv4 subnet: the server has no address sandboxes can reach it at");
  return firstHostAddress(subnet);
}

/** The first host address of an IPv4 CIDR range (172.17.0.0/16 -> 172.17.0.1). */
export function firstHostAddress(cidr: string): string {
  const [base = '', bits = '32'] = cidr.split('/');
  const octets = base.split('.').map(Number);
  const value = ((octets.reduce((n, o) => n * 256 + o, 0) & maskOf(Number(bits))) >>> 0) + 1;
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');
}

function maskOf(bits: number): number {
  return bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
}
