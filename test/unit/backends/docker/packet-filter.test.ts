import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { engineResolvers } from '../../../../src/backends/docker/docker-networks.js';
import { addressRules, chainsOf, egressRules, restoreInput } from '../../../../src/backends/docker/packet-filter.js';
import { networkModeOf } from '../../../../src/backends/docker/container-spec.js';
import { egressLookup } from '../../../../src/services/sandboxes/sandbox-network.js';

/** What sandboxd puts in the host's packet filter (the integration test proves it on the host). */
describe('packet filter rules', () => {
  const bridges = [
    { iface: 'sandboxd-o', gateway: '10.10.0.1', internal: false },
    { iface: 'sandboxd-p', gateway: '10.10.1.1', internal: true },
  ];

  it('names its chains from the network name', () => {
    expect(chainsOf('sandboxd')).toEqual({ egress: 'SANDBOXD-EGRESS', rules: 'SANDBOXD-RULES' });
  });

  it('lets answers and each sandbox\'s rules first, then the proxy port, then drops the proxy bridge, the host and every range that is not public', () => {
    const rules = egressRules('E', 'R', bridges, 18889, ['10.255.255.53', 'fd00::53']).map((rule) => rule.join(' '));
    expect(rules.slice(0, 11)).toEqual([
      '-A E -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
      '-A E -j R',
      '-A E -i sandboxd-o -d 10.10.0.1/32 -p tcp --dport 18889 -j ACCEPT',
      '-A E -i sandboxd-p -d 10.10.1.1/32 -p tcp --dport 18889 -j ACCEPT',
      '-A E -i sandboxd-p -j DROP',
      // The engine's DNS in each container forwards from the container's address.
      '-A E -i sandboxd-o -d 10.255.255.53/32 -p udp --dport 53 -j RETURN',
      '-A E -i sandboxd-o -d 10.255.255.53/32 -p tcp --dport 53 -j RETURN',
      '-A E -m addrtype --dst-type LOCAL -j DROP',
      '-A E -d 0.0.0.0/8 -j DROP',
      '-A E -d 10.0.0.0/8 -j DROP',
      '-A E -d 100.64.0.0/10 -j DROP',
    ]);
    for (const cidr of ['172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '168.63.129.16/32', '240.0.0.0/4']) expect(rules).toContain(`-A E -d ${cidr} -j DROP`);
    expect(rules.some((rule) => rule.includes(':'))).toBe(false);
    expect(egressRules('E', 'R', bridges, undefined).some((rule) => rule.includes('--dport'))).toBe(false);
  });

  it('puts every deny before any allow, IPv4 only', () => {
    const rules = addressRules('R', [
      { source: '10.10.0.5', allow: ['192.0.2.2/32', 'fd00::/8'], deny: [] },
      { source: '10.10.0.6', allow: [], deny: ['169.254.0.0/16'] },
    ]).map((rule) => rule.join(' '));
    expect(rules).toEqual(['-A R -s 10.10.0.6/32 -d 169.254.0.0/16 -j DROP', '-A R -s 10.10.0.5/32 -d 192.0.2.2/32 -j ACCEPT']);
  });

  it('gives a range with a port that port alone, TCP and UDP', () => {
    const rules = addressRules('R', [{ source: '10.10.0.5', allow: ['192.0.2.2/32:8080', 'fd00::/8:53'], deny: ['10.0.0.0/8:22'] }]).map((rule) => rule.join(' '));
    expect(rules).toEqual([
      '-A R -s 10.10.0.5/32 -d 10.0.0.0/8 -p tcp --dport 22 -j DROP',
      '-A R -s 10.10.0.5/32 -d 10.0.0.0/8 -p udp --dport 22 -j DROP',
      '-A R -s 10.10.0.5/32 -d 192.0.2.2/32 -p tcp --dport 8080 -j ACCEPT',
      '-A R -s 10.10.0.5/32 -d 192.0.2.2/32 -p udp --dport 8080 -j ACCEPT',
    ]);
  });

  it('replaces whole chains in one iptables-restore transaction', () => {
    expect(restoreInput(['E'], [['-A', 'E', '-j', 'DROP']])).toBe('*filter\n:E - [0:0]\n-A E -j DROP\nCOMMIT\n');
  });
});

describe('the network a container joins', () => {
  const names = { open: 'sandboxd', proxy: 'sandboxd-proxy' };
  it('is sandboxd\'s own by egress, none for restrictive or egress none, never the default bridge', () => {
    expect(networkModeOf({ profile: 'moderate' }, names)).toBe('sandboxd');
    expect(networkModeOf({ profile: 'permissive', network: { egress: 'proxy', allow: [], deny: [] } }, names)).toBe('sandboxd-proxy');
    expect(networkModeOf({ profile: 'moderate', network: { egress: 'none', allow: [], deny: [] } }, names)).toBe('none');
    expect(networkModeOf({ profile: 'restrictive' }, names)).toBe('none');
  });
});

describe('the egress lookup the proxy calls', () => {
  it('reads the record per call: stored lists, the profile default, undefined for no sandbox', async () => {
    const rows = new Map<string, any>([
      ['a', { profile: 'moderate', network: { egress: 'proxy', allow: ['pypi.org'], deny: [] } }],
      ['b', { profile: 'restrictive', network: null }],
    ]);
    const lookup = egressLookup({ byUuid: async (uuid: string) => rows.get(uuid) });
    expect(await lookup('a')).toEqual({ egress: 'proxy', allow: ['pypi.org'], deny: [] });
    expect(await lookup('b')).toEqual({ egress: 'none', allow: [], deny: [] });
    expect(await lookup('c')).toBeUndefined();
  });
});

describe("the resolvers the engine's DNS forwards to", () => {
  it("reads the daemon's dns setting first, else the host's nameservers, without loopback ones", () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-resolvers-'));
    try {
      const write = (name: string, text: string) => {
        writeFileSync(join(dir, name), text);
        return join(dir, name);
      };
      const stub = write('resolv.conf', 'nameserver 127.0.0.53\noptions edns0\n');
      const upstream = write('upstream.conf', '# systemd-resolved\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver 10.255.255.53\n');
      const none = join(dir, 'missing.json');
      expect(engineResolvers({ daemonJson: none, resolvConf: [stub, upstream] })).toEqual(['10.255.255.53', 'fe80::1']);
      const daemon = write('daemon.json', JSON.stringify({ dns: ['192.168.7.1', '127.0.0.1'] }));
      expect(engineResolvers({ daemonJson: daemon, resolvConf: [stub, upstream] })).toEqual(['192.168.7.1']);
      expect(engineResolvers({ daemonJson: none, resolvConf: [stub] })).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
