import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxEgress } from '../../../../src/services/egress/egress-proxy.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';
import { connectVia, ProxyUpstream, viaProxy } from '../../../helpers/proxy-upstream.js';

/**
 * The egress proxy as an attacker in a sandbox meets it (issue 25, items 10, 11 and 14):
 * private and cloud-internal destinations, IP literals in the spellings WHATWG accepts, allow
 * entries with a port, and hook paths spelled to slip past a prefix. Names resolve through a
 * test map; nothing is sent past this machine (a private address is checked, never dialled).
 */
const PRIVATE: Record<string, string> = {
  'rfc1918-a.test': '10.0.0.5',
  'rfc1918-b.test': '172.16.3.4',
  'rfc1918-c.test': '192.168.1.1',
  'cgnat.test': '100.64.1.1',
  'azure.test': '168.63.129.16',
  'alibaba.test': '100.100.100.200',
  'ula.test': 'fd00::5',
};
const NAMES: Record<string, string> = { ...PRIVATE, 'allowed.test': '127.0.0.1' };
const rules = new Map<string, SandboxEgress>();

let h: FakeHarness;
let upstream: ProxyUpstream;
let proxy: string;
let uuid: string;
let token: string;
const setRules = (r: Partial<SandboxEgress>) => rules.set(uuid, { egress: 'open', allow: [], deny: [], ...r });
const route = (host: string, port = 80) => h.services.egress['proxy'].route(uuid, host, port);

beforeAll(async () => {
  upstream = new ProxyUpstream();
  await upstream.start();
  h = await fakeHarness({
    egress: {
      enabled: true,
      port: 0,
      host: '127.0.0.1',
      resolve: async (name) => {
        const address = NAMES[name];
        if (!address) throw Object.assign(new Error('no'), { code: 'ENOTFOUND' });
        return [{ address, family: address.includes(':') ? 6 : 4 }];
      },
      egressOf: (id) => rules.get(id),
      proxyTimeoutMs: 2000,
    },
  });
  await h.services.egress.start();
  proxy = h.services.egress.url!;
  const created = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'hard' } });
  expect(created.statusCode, created.body).toBe(201);
  uuid = created.json().data.uuid;
  token = h.services.egress.tokens.mint(uuid);
});

afterAll(async () => {
  await h?.close();
  await upstream?.close();
});

beforeEach(async () => {
  setRules({});
  for (const hook of await h.services.egress.hooks.list()) await h.services.egress.hooks.remove(hook.name);
});

describe('private and cloud-internal destinations (item 10)', () => {
  // Decided by `route`, the check every request and tunnel passes: nothing is dialled, even where it would let one through.
  it.each(Object.entries(PRIVATE))('refuses %s (%s) with egress open', async (name, address) => {
    const decided = await route(name, 443);
    expect(decided.refusal?.status).toBe(403);
    expect(decided.refusal?.reason).toContain(`resolves to ${address}, not a public address`);
  });

  it('refuses them as literals too, and lets one through when an allow entry names it', async () => {
    expect((await viaProxy(proxy, 'http://10.0.0.5/', { token })).status).toBe(403);
    expect((await connectVia(proxy, '[fd00::5]:443', token)).status).toBe(403);
    setRules({ allow: ['10.0.0.0/8', 'fd00::/8', '168.63.129.16'] });
    // Checked, not dialled: the address is not on this machine.
    expect(await route('rfc1918-a.test')).toEqual({ address: '10.0.0.5' });
    expect(await route('ula.test')).toEqual({ address: 'fd00::5' });
    expect(await route('azure.test')).toEqual({ address: '168.63.129.16' });
    expect(await route('10.0.0.5')).toEqual({ address: '10.0.0.5' });
    expect((await route('cgnat.test')).refusal?.reason).toContain('not a public address');
    expect((await route('rfc1918-c.test')).refusal?.status).toBe(403);
  });
});

describe('IP literals as WHATWG reads them (item 14)', () => {
  it.each(['2130706433', '127.1', '0x7f.1', '0177.0.0.1', '0x7f000001', '127.0.0.1.'])('CONNECT %s is 127.0.0.1, a literal refused unless allowed', async (spelled) => {
    const refused = await connectVia(proxy, `${spelled}:${upstream.port}`, token);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain(`127.0.0.1:${upstream.port} is a literal IP address`);
    setRules({ allow: [`127.0.0.1:${upstream.port}`] });
    const opened = await connectVia(proxy, `${spelled}:${upstream.port}`, token);
    expect(opened.status).toBe(200);
    expect(opened.tunnelled).toContain('hello from upstream');
  });

  it('answers 400 for a CONNECT host no URL could hold, and refuses userinfo tricks', async () => {
    expect((await connectVia(proxy, `foo.123:${upstream.port}`, token)).status).toBe(400);
    expect((await connectVia(proxy, `allowed.test@127.0.0.1:${upstream.port}`, token)).status).toBe(400);
    expect((await connectVia(proxy, `1.2.3.4.5:${upstream.port}`, token)).status).toBe(400);
  });

  it('a CONNECT host in capitals is the lower-case name its allow entry names', async () => {
    setRules({ egress: 'proxy', allow: ['allowed.test', '127.0.0.1'] });
    expect((await connectVia(proxy, `ALLOWED.Test:${upstream.port}`, token)).status).toBe(200);
  });
});

describe('allow entries with a port (item 14)', () => {
  it('127.0.0.1:<port> opens that port alone; a bare address keeps meaning every port', async () => {
    const other = new ProxyUpstream();
    await other.start();
    try {
      setRules({ allow: [`127.0.0.1:${upstream.port}`] });
      expect((await viaProxy(proxy, `http://127.0.0.1:${upstream.port}/`, { token })).status).toBe(200);
      const closed = await viaProxy(proxy, `http://127.0.0.1:${other.port}/`, { token });
      expect(closed.status).toBe(403);
      expect((await connectVia(proxy, `127.0.0.1:${other.port}`, token)).status).toBe(403);
      setRules({ allow: ['127.0.0.1'] });
      expect((await viaProxy(proxy, `http://127.0.0.1:${other.port}/`, { token })).status).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('host globs, names resolving to private addresses and deny entries take a port too', async () => {
    setRules({ egress: 'proxy', allow: [`allowed.test:${upstream.port}`, `127.0.0.1:${upstream.port}`] });
    expect((await viaProxy(proxy, `http://allowed.test:${upstream.port}/`, { token })).status).toBe(200);
    expect((await viaProxy(proxy, 'http://allowed.test:1/', { token })).text).toContain('not in the sandbox');
    setRules({ allow: ['127.0.0.1'], deny: [`allowed.test:${upstream.port}`] });
    expect((await viaProxy(proxy, `http://allowed.test:${upstream.port}/`, { token })).text).toContain('deny list');
  });

  it('a network entry with a bad port is a 400 naming it', async () => {
    const res = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'bad-port', network: { egress: 'proxy', allow: ['example.com:0'] } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain("'example.com:0' has a bad port");
  });
});

describe('hook paths as the upstream reads them (item 11)', () => {
  const post = (payload: object) => h.app.inject({ method: 'POST', url: '/proxy/hooks', payload });
  const get = (path: string) => viaProxy(proxy, `http://allowed.test:${upstream.port}${path}`, { token });

  beforeEach(() => setRules({ allow: ['127.0.0.1'] }));

  it.each(['/blocked', '/%62locked', '/bl%6Fcked/x', '//blocked', '/;/blocked', '/blocked;jsessionid=1', '/a/..;/blocked', '/%2e%2e/blocked', '/a%2f..%2fblocked', '/a\\..\\blocked'])(
    'a block on /blocked stops %s',
    async (path) => {
      expect((await post({ name: 'no-blocked', event: 'on_request', match: { path_prefix: '/blocked' }, target: { type: 'block', status: 451 } })).statusCode).toBe(201);
      const answer = await get(path);
      expect(answer.status, answer.text).toBe(451);
    },
  );

  it('/BLOCKED passes a case-sensitive rule and is stopped where the rule says path_ignore_case', async () => {
    await post({ name: 'exact-case', event: 'on_request', match: { path_prefix: '/blocked' }, target: { type: 'block', status: 451 } });
    expect((await get('/BLOCKED')).status).toBe(200);
    const created = await post({ name: 'any-case', event: 'on_request', match: { path_prefix: '/blocked', path_ignore_case: true }, target: { type: 'block', status: 452 } });
    expect(created.json().data.match).toEqual({ path_prefix: '/blocked', path_ignore_case: true });
    expect((await get('/BLOCKED')).status).toBe(452);
    expect((await get('/%42LOCKED/x')).status).toBe(452);
    expect((await get('/unblocked')).status).toBe(200);
  });

  it('other paths still pass, and a prefix ending in / keeps its meaning', async () => {
    await post({ name: 'api-dir', event: 'on_request', match: { path_prefix: '/api/' }, target: { type: 'block', status: 451 } });
    expect((await get('/api')).status).toBe(200);
    expect((await get('/apix')).status).toBe(200);
    expect((await get('/api/')).status).toBe(451);
    expect((await get('//api//v1')).status).toBe(451);
    expect((await get('/x/../api/v1')).status).toBe(451);
  });
});
