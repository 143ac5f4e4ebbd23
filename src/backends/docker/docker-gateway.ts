import { ipv4Text, ipv4Value, maskOf } from '../../domain/egress.js';

/**
 * The first host address of an IPv4 CIDR range (172.17.0.0/16 -> 172.17.0.1): the address Docker
 * gives a bridge network's gateway when its IPAM config names none.
 */
export function firstHostAddress(cidr: string): string {
  const [base = '', bits = '32'] = cidr.split('/');
  return ipv4Text(((ipv4Value(base) & maskOf(Number(bits))) >>> 0) + 1);
}
