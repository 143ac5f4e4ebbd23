import { afterEach, describe, expect, it } from 'vitest';
import { parseNetworkEntry } from '../../../../src/domain/egress.js';
import { sandboxEgress } from '../../../../src/services/sandboxes/sandbox-network.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

/** The `network` field over the fake backend: validation, storage, PATCH, rules pushed to the backend, proxy env. */
let h: FakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function harness(proxy = true): Promise<FakeHarness> {
  h = await fakeHarness(proxy ? { egress: { enabled: true, port: 0, host: '127.0.0.1' } } : {});
  await h.services.egress.start();
  return h;
}

const post = (body: Record<string, unknown>) => h!.app.inject({ method: 'POST', url: '/sandboxes', payload: body });
const patch = (name: string, body: Record<string, unknown>) => h!.app.inject({ method: 'PATCH', url: `/sandboxes/${name}`, payload: body });

describe('network entries', () => {
  it('classifies globs, addresses and CIDR ranges, and says what is wrong with the rest', () => {
    expect(parseNetworkEntry('*.github.com')).toEqual({ kind: 'host', pattern: '*.github.com' });
    expect(parseNetworkEntry('10.1.2.3')).toEqual({ kind: 'cidr', cidr: '10.1.2.3/32', family: 4 });
    expect(parseNetworkEntry('10.1.2.0/24')).toEqual({ kind: 'cidr', cidr: '10.1.2.0/24', family: 4 });
    expect(parseNetworkEntry('fd00::/8')).toEqual({ kind: 'cidr', cidr: 'fd00::/8', family: 6 });
    expect(parseNetworkEntry('10.1.2.3/24')).toMatch(/did you mean 10\.1\.2\.0\/24/);
    expect(parseNetworkEntry('10.0.0.0/33')).toMatch(/bad prefix length/);
    expect(parseNetworkEntry('300.1.1.1')).toMatch(/not an IPv4 address/);
    expect(parseNetworkEntry('bad host!')).toMatch(/not a host name glob/);
    expect(parseNetworkEntry('pypi.org/24')).toMatch(/not a CIDR range/);
  });
});

describe('the network field', () => {
  it('defaults to the profile\'s egress, shown in every answer, and a non-empty allow implies proxy', async () => {
    await harness();
    expect((await post({ name: 'plain' })).json().data.network).toEqual({ egress: 'open', allow: [], deny: [] });
    expect((await post({ name: 'locked', profile: 'restrictive' })).json().data.network).toEqual({ egress: 'none', allow: [], deny: [] });
    const proxied = await post({ name: 'px', network: { allow: ['pypi.org', '10.1.0.0/16'], deny: ['evil.pypi.org'] } });
    expect(proxied.statusCode).toBe(201);
    expect(proxied.json().data.network).toEqual({ egress: 'proxy', allow: ['pypi.org', '10.1.0.0/16'], deny: ['evil.pypi.org'] });
    const record = await h!.services.sandboxes.require('px');
    expect(sandboxEgress(record)).toEqual({ egress: 'proxy', allow: ['pypi.org', '10.1.0.0/16'], deny: ['evil.pypi.org'] });
    expect(h!.backend.instances.get(record.backend_id!)!.spec.network?.egress).toBe('proxy');
    expect((await h!.app.inject({ url: '/sandboxes/px' })).json().data.network.egress).toBe('proxy');
  });

  it('refuses bad input, naming the field', async () => {
    await harness();
    const cases: [unknown, RegExp][] = [
      [{ allow: ['bad host!'] }, /network\.allow\[0\].*not a host name glob/],
      [{ deny: ['ok.org', '10.1.2.3/24'] }, /network\.deny\[1\].*did you mean 10\.1\.2\.0\/24/],
      [{ egress: 'vpn' }, /network\.egress.*must be one of open, proxy, none/],
      [{ egress: 'open', allow: ['pypi.org'] }, /network\.allow\[0\].*host name; with egress open only addresses/],
      [{ egress: 'none', deny: ['10.0.0.0/8'] }, /network\.deny: egress none reaches nothing/],
      [{ egres: 'open' }, /network/],
    ];
    for (const [network, message] of cases) {
      const res = await post({ name: 'bad', network });
      expect(res.statusCode, JSON.stringify(network)).toBe(400);
      expect(res.json().error).toMatch(message);
    }
    const restrictive = await post({ name: 'bad', profile: 'restrictive', network: { egress: 'open' } });
    expect(restrictive.statusCode).toBe(400);
    expect(restrictive.json().error).toMatch(/^network\.egress: a restrictive sandbox has no network/);
    const restrictiveAllow = await post({ name: 'bad', profile: 'restrictive', network: { allow: ['pypi.org'] } });
    expect(restrictiveAllow.json().error).toMatch(/^network\.allow: a restrictive sandbox has no network/);
    expect((await h!.app.inject({ url: '/sandboxes' })).json().data).toEqual([]);
  });

  it('refuses proxy egress without the proxy, and where the backend cannot enforce egress', async () => {
    await harness(false);
    const res = await post({ name: 'px', network: { egress: 'proxy' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/network\.egress: 'proxy' needs the egress proxy.*--proxy/);
    h!.backend.omit('egress');
    const none = await post({ name: 'nn', network: { egress: 'none' } });
    expect(none.statusCode).toBe(422);
    expect(none.json()).toMatchObject({ code: 'UNSUPPORTED', error: expect.stringMatching(/fake.*network\.egress 'none'/) });
    expect((await post({ name: 'open', network: { egress: 'open' } })).statusCode).toBe(201);
  });

  it('PATCH replaces the lists at once, keeps the egress, and pushes open sandboxes\' address rules to the backend', async () => {
    await harness();
    await post({ name: 'op', network: { egress: 'open', allow: ['192.0.2.2'] } });
    const id = (await h!.services.sandboxes.require('op')).backend_id!;
    expect(h!.backend.egressState.rules).toEqual([{ id, allow: ['192.0.2.2/32'], deny: [] }]);

    const res = await patch('op', { network: { deny: ['169.254.0.0/16'] } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.network).toEqual({ egress: 'open', allow: ['192.0.2.2'], deny: ['169.254.0.0/16'] });
    expect(h!.backend.egressState.rules).toEqual([{ id, allow: ['192.0.2.2/32'], deny: ['169.254.0.0/16'] }]);

    // An entry with a port opens that port alone: the API port of an allowed host stays closed.
    const ported = await patch('op', { network: { allow: ['192.0.2.2:8080'], deny: [] } });
    expect(ported.json().data.network).toEqual({ egress: 'open', allow: ['192.0.2.2:8080'], deny: [] });
    expect(h!.backend.egressState.rules).toEqual([{ id, allow: ['192.0.2.2/32:8080'], deny: [] }]);

    expect((await h!.app.inject({ method: 'POST', url: '/sandboxes/op/stop' })).statusCode).toBe(200);
    expect(h!.backend.egressState.rules).toEqual([]);
    expect((await h!.app.inject({ method: 'POST', url: '/sandboxes/op/start' })).statusCode).toBe(200);
    expect(h!.backend.egressState.rules).toHaveLength(1);
    expect((await h!.app.inject({ method: 'DELETE', url: '/sandboxes/op' })).statusCode).toBe(200);
    expect(h!.backend.egressState.rules).toEqual([]);

    await post({ name: 'px', network: { allow: ['pypi.org'] } });
    const changed = await patch('px', { network: { allow: ['*.github.com'] } });
    expect(changed.json().data.network).toEqual({ egress: 'proxy', allow: ['*.github.com'], deny: [] });
    expect(sandboxEgress(await h!.services.sandboxes.require('px')).allow).toEqual(['*.github.com']);
    // Proxy sandboxes' lists are the proxy's: nothing in the packet filter.
    expect(h!.backend.egressState.rules).toEqual([]);
  });

  it('PATCH refuses an egress change, bad entries and an unknown sandbox', async () => {
    await harness();
    await post({ name: 'op' });
    const egress = await patch('op', { network: { egress: 'proxy' } });
    expect(egress.statusCode).toBe(400);
    expect(egress.json().error).toMatch(/^network\.egress: cannot change from 'open' to 'proxy'/);
    expect((await patch('op', { network: { allow: ['pypi.org'] } })).json().error).toMatch(/^network\.allow\[0\]: 'pypi\.org' is a host name/);
    expect((await patch('op', { network: { allow: ['10.0.0.0/40'] } })).json().error).toMatch(/network\.allow\[0\].*prefix length/);
    const unknown = await patch('nope', { network: { allow: ['10.0.0.1'] } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toBe("sandbox 'nope' not found");
  });

  it('gives networked sandboxes the proxy variables with their own token, the gateway in NO_PROXY; none gets nothing', async () => {
    await harness();
    await post({ name: 'px', network: { allow: ['pypi.org'] } });
    await post({ name: 'off', network: { egress: 'none' } });
    await post({ name: 'op' });
    const px = await h!.services.sandboxes.require('px');
    const env = await h!.services.egress.sandboxEnv(px);
    const token = h!.services.egress.tokens.mint(px.uuid);
    const port = new URL(h!.services.egress.url!).port;
    expect(env).toMatchObject({
      HTTP_PROXY: `http://sbx:${token}@127.0.0.1:${port}`,
      https_proxy: `http://sbx:${token}@127.0.0.1:${port}`,
      NO_PROXY: 'localhost,127.0.0.1,127.0.0.1',
    });
    expect(await h!.services.egress.sandboxEnv(await h!.services.sandboxes.require('off'))).toEqual({});
    // Open sandboxes are sent to the egress proxy too (advisory for them: they also reach out directly).
    const op = await h!.services.sandboxes.require('op');
    expect(await h!.services.egress.sandboxEnv(op)).toMatchObject({ HTTP_PROXY: `http://sbx:${h!.services.egress.tokens.mint(op.uuid)}@127.0.0.1:${port}` });
  });

  it('does not hand a proxy-mode sandbox a pool instance made on the default network', async () => {
    h = await fakeHarness({ poolSize: 1, egress: { enabled: true, port: 0, host: '127.0.0.1' } });
    await h.services.egress.start();
    h.services.pool.warm();
    await expect.poll(() => h!.services.pool.size).toBe(1);
    await post({ name: 'px', network: { allow: ['pypi.org'] } });
    expect(h.services.pool.size).toBe(1);
    await post({ name: 'op' });
    expect((await h.services.sandboxes.require('op')).uuid).not.toBe((await h.services.sandboxes.require('px')).uuid);
  });
});
