import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { canonicalHost, compileDestinations, destinationError, targetMatches } from '../../../src/domain/destinations.js';
import { parseNetworkEntry } from '../../../src/domain/egress.js';
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

  it('an entry with a port matches that port alone; one without matches every port', () => {
    const list = compileDestinations(['127.0.0.1:8080', '10.0.0.0/8', '*.example.com:443', 'any.test', '[::1]:9000', '[fd00::/8]:53']);
    expect(list.address('127.0.0.1', 8080)).toBe(true);
    expect(list.address('127.0.0.1', 18888)).toBe(false);
    expect(list.address('127.0.0.1')).toBe(false);
    expect(list.address('10.2.3.4', 1)).toBe(true);
    expect(list.host('api.example.com', 443)).toBe(true);
    expect(list.host('api.example.com', 80)).toBe(false);
    expect(list.host('any.test', 5)).toBe(true);
    expect(list.address('::1', 9000)).toBe(true);
    expect(list.address('::1', 9001)).toBe(false);
    expect(list.address('fd12::1', 53)).toBe(true);
    expect(targetMatches(list, '[::1]', 9000)).toBe(true);
    expect(parseNetworkEntry('127.0.0.1:8080')).toEqual({ kind: 'cidr', cidr: '127.0.0.1/32', family: 4, port: 8080 });
    expect(parseNetworkEntry('10.1.0.0/16:443')).toEqual({ kind: 'cidr', cidr: '10.1.0.0/16', family: 4, port: 443 });
    expect(parseNetworkEntry('API.example.com:443')).toEqual({ kind: 'host', pattern: 'api.example.com', port: 443 });
    expect(parseNetworkEntry('[::1]:8080')).toEqual({ kind: 'cidr', cidr: '::1/128', family: 6, port: 8080 });
  });

  it.each(['a:0', 'a:65536', 'a:x', ':80', '[::1', '[::1]x', '[a.b]:80', '1.2.3.4:', 'a:1:2x'])('refuses %j, naming the port or the brackets', (entry) => {
    expect(destinationError(entry)).toBeDefined();
  });

  it.each([
    ['2130706433', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['%31%32%37.0.0.1', '127.0.0.1'],
    ['[::ffff:127.0.0.1]', '[::ffff:7f00:1]'],
    ['Example.COM', 'example.com'],
  ])('reads the host %s as WHATWG does: %s', (raw, host) => {
    expect(canonicalHost(raw)).toBe(host);
  });

  it.each(['foo.123', '1.2.3.4.5', 'a@b', 'a/b', 'a b', ''])('finds no host in %j', (raw) => {
    expect(canonicalHost(raw)).toBeUndefined();
  });

  it.each(['', 'bad host', 'a..b', '-a.com', '10.0.0.0/33', '10.0.0.1/x', '300.1.1.1/8', 'a/b', 'x'.repeat(254)])('refuses %j, saying why', (entry) => {
    expect(destinationError(entry)).toBeDefined();
    expect(() => compileDestinations([entry])).toThrow();
  });
});

describe('internal addresses (refused unless an allow IP/CIDR names them)', () => {
  const internal = new InternalAddresses(() => ['10.99.0.0/16']);

  it('loopback, this-host, link-local, multicast, IPv6 loopback and link-local, the given sandbox ranges', () => {
    for (const ip of ['127.0.0.1', '127.5.5.5', '0.0.0.0', '169.254.169.254', '224.0.0.1', '::1', '::', 'fe80::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '10.99.3.4']) {
      expect(internal.has(ip), ip).toBe(true);
    }
    for (const ip of ['8.8.8.8', '140.82.112.3', '2606:4700::1111']) expect(internal.has(ip), ip).toBe(false);
  });

  it('private networks and the clouds\' internal services: RFC 1918, CGNAT, IPv6 ULA, 168.63.129.16, 100.100.100.200', () => {
    for (const ip of ['10.0.0.1', '10.98.0.1', '172.16.0.1', '172.31.255.254', '192.168.1.1', '100.64.0.1', '100.127.255.254', '168.63.129.16', '100.100.100.200', 'fc00::1', 'fd00:ec2::254', '::ffff:10.1.2.3', '::ffff:a01:203']) {
      expect(internal.has(ip), ip).toBe(true);
    }
    for (const ip of ['172.32.0.1', '100.128.0.1', '168.63.129.17', '11.0.0.1']) expect(internal.has(ip), ip).toBe(false);
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
