import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../helpers/fake-app.js';

/**
 * Issue 25, item 17, as an attacker: under the default `--store-allowed-hosts *` a caller made
 * stores at 127.0.0.1:<port> and read from their errors which loopback ports listen
 * (ECONNREFUSED against a server's greeting or a timeout). Loopback and the other internal
 * addresses are now refused before any connection, with one answer for every port, unless
 * an entry names them; the real engines and servers on 127.0.0.1 are used.
 */
let open: FakeHarness;
let named: FakeHarness;
let listener: net.Server;
let listening: number;

beforeAll(async () => {
  open = await fakeHarness({});
  named = await fakeHarness({ storeAllowedHosts: ['*', '127.0.0.1'] });
  listener = net.createServer((socket) => socket.end('not a database\n'));
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  listening = (listener.address() as net.AddressInfo).port;
}, 60_000);

afterAll(async () => {
  await open?.close();
  await named?.close();
  listener?.close();
});

async function create(h: FakeHarness, body: object) {
  const res = await h.app.inject({ method: 'POST', url: '/stores', payload: body });
  return { status: res.statusCode, ...(res.json() as { code?: string; error?: string }) };
}

describe('stores and internal addresses', () => {
  it('answers every loopback port alike under the default *, before connecting', async () => {
    const ports = [1, 5432, 3306, 6379, listening];
    const byTarget = new Map<string, Set<string>>();
    for (const [index, port] of ports.entries()) {
      for (const kind of ['postgres', 'mysql', 'redis']) {
        for (const host of ['127.0.0.1', 'localhost', '::1', '0.0.0.0']) {
          const answer = await create(open, { name: `probe-${kind}-${index}-${host.replace(/[.:]/g, '')}`, kind, config: { host, port } });
          expect(answer.status).toBe(400);
          expect(answer.error).toMatch(/^config\.host: '[^']+'( \([^)]+\))? is an internal address .* only when --store-allowed-hosts names it/);
          const seen = byTarget.get(`${kind} ${host}`) ?? new Set<string>();
          byTarget.set(`${kind} ${host}`, seen.add(`${answer.code} ${answer.error}`));
        }
      }
    }
    // One answer per host and kind, whichever port: nothing tells a listening port from a closed one.
    for (const seen of byTarget.values()) expect(seen.size).toBe(1);
    // Without validation the store is not even made, nor at its first call (nothing kept can connect there).
    expect((await create(open, { name: 'later', kind: 'redis', config: { host: '127.0.0.1', port: 6379 }, validate: false })).status).toBe(400);
  });

  it('connects when an entry names the address, and then says why it could not', async () => {
    const refused = await create(named, { name: 'closed', kind: 'mysql', config: { host: '127.0.0.1', port: 1 } });
    expect(refused).toMatchObject({ status: 400, error: 'config: cannot connect to mysql at 127.0.0.1:1: ECONNREFUSED (create with validate: false to skip this check)' });
    expect(await create(named, { name: 'pg', kind: 'postgres', config: { host: '127.0.0.1', port: 5432, database: 'postgres' } })).toMatchObject({ status: 201 });
  });
});
