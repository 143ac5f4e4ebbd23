import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProxyLogEntry } from '../../../../src/schemas/proxy-schemas.js';
import { allMigrations } from '../../../../src/services/domains.js';
import { ProxyLog } from '../../../../src/services/egress/proxy-log.js';
import { ProxyRepository } from '../../../../src/state/proxy-repository.js';
import { openStore, type Store } from '../../../../src/state/store.js';

const dirs: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const open = async (dir: string) => {
  const store = await openStore(dir, allMigrations());
  stores.push(store);
  return store;
};
const entry = (sandbox: string, n: number): ProxyLogEntry => ({
  timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  sandbox,
  sandbox_uuid: `uuid-${sandbox}`,
  method: 'GET',
  url: `http://example.test/${n}`,
  host: 'example.test',
  port: 80,
  decision: n % 2 === 0 ? 'allow' : 'deny',
  reason: 'rule',
  status: 200,
  bytes_in: n,
  bytes_out: 0,
  latency_ms: 1.5,
});

describe('the proxy log', () => {
  it('keeps its decisions across a restart, newest first, per sandbox', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-proxy-log-'));
    dirs.push(dir);
    const first = await open(dir);
    const log = new ProxyLog(new ProxyRepository(first.sql));
    for (let n = 0; n < 6; n++) await log.add(entry(n < 3 ? 'a' : 'b', n));
    await first.close();
    stores.splice(0);

    const again = new ProxyLog(new ProxyRepository((await open(dir)).sql));
    expect((await again.recent(100)).map((e) => e.bytes_in)).toEqual([5, 4, 3, 2, 1, 0]);
    expect(await again.recent(2, 'a')).toEqual([entry('a', 2), entry('a', 1)]);
    expect(await again.recent(10, 'nobody')).toEqual([]);
  });

  it('holds at most its size and a pruning step, and answers the newest of them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-proxy-log-'));
    dirs.push(dir);
    const store = await open(dir);
    const log = new ProxyLog(new ProxyRepository(store.sql), 10);
    for (let n = 0; n < 2_000; n++) await log.add(entry('a', n));
    const rows = (await store.sql.first<{ n: number }>('select count(*) as n from proxy_decisions'))?.n;
    expect(rows).toBeLessThanOrEqual(10 + 256);
    expect((await log.recent(10_000)).map((e) => e.bytes_in)).toEqual(Array.from({ length: 10 }, (_, i) => 1_999 - i));
  });
});
