import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { compileDestinations, destinationError, targetMatches } from '../../../src/domain/destinations.js';
import { dockerBridgeRanges, InternalAddresses } from '../../../src/services/egress/internal-addresses.js';

describe('destination rules (allow / deny entries)', () => {
  it('host globs: * crosses dots, *.x.com is subdomains only, case-insensitive, a trailing dot ignored', () => {
    const list = compileDestinations(['pypi.org', '*.github.com', 'api-*.example.com']);
    expect(list.host('pypi.org')).toBe(true);
    expect(list.host('PyPI.org.')).toBe(true);
    expect(list.host('api.github.com')).toBe(true);
    expect(list.host('a.b.github.com')).toBe(true);
    expect(list.host('github.com')).toBe(false);
    expect(list.host('evilgithub.com')).toBe(false);
    expect(list.host('api-eu.example.com')).toBe(true);
    expect(list.host('pypi.org.evil.com')).toBe(false);
  });

  it('IPs and CIDRs match literal addresses, IPv4-mapped IPv6 as IPv4', () => {
    const list = compileDestinations(['10.1.2.0/24', '127.0.0.1', '::1', 'fd00::/8']);
    expect(list.address('10.1.2.200')).toBe(true);
    expect(list.address('10.1.3.1')).toBe(false);
    expect(list.address('::ffff:127.0.0.1')).toBe(true);
    expect(list.address('::1')).toBe(true);
    expect(list.address('fd12::5')).toBe(true);
    expect(list.host('127.0.0.1')).toBe(false);
    expect(targetMatches(list, '[::1]')).toBe(true);
    expect(targetMatches(compileDestinations(['*.test']), 'a.test')).toBe(true);
  });

  it.each(['', 'bad host', 'a..b', '-a.com', '10.0.0.0/33', '10.0.0.1/x', '300.1.1.1/8', 'a/b', 'x'.repeat(254)])('refuses %j, saying why', (entry) => {
    expect(destinationError(entry)).toBeDefined();
    expect(() => compileDestinations([entry])).toThrow();
  });
});

describe('internal addresses (refused unless an allow IP/CIDR names them)', () => {
  const internal = new InternalAddresses(() => ['10.99.0.0/16']);

  it('loopback, this-host, link-local, multicast, IPv6 loopback and link-local, the given sandbox ranges', () => {
    for (const ip of ['127.0.0.1', '127.5.5.5', '0.0.0.0', '169.254.169.254', '224.0.0.1', '::1', '::', 'fe80::1', '::ffff:127.0.0.1', '10.99.3.4']) {
      expect(internal.has(ip), ip).toBe(true);
    }
    for (const ip of ['8.8.8.8', '203.0.113.5', '2001:db8::1', '10.98.0.1']) expect(internal.has(ip), ip).toBe(false);
  });

  it("the host's own addresses, and by default the host's bridge subnets", () => {
    const own = Object.values(networkInterfaces()).flatMap((a) => a ?? []).map((a) => a.address.split('%')[0]!);
    for (const ip of own) expect(internal.has(ip), ip).toBe(true);
    const bridges = dockerBridgeRanges();
    const byDefault = new InternalAddresses();
    for (const cidr of bridges.filter((c) => c.includes('.'))) {
      const [base = ''] = cidr.split('/');
      const parts = base.split('.').map(Number);
      parts[3] = (parts[3]! + 77) % 255;
      expect(byDefault.has(parts.join('.')), cidr).toBe(true);
    }
  });
});
