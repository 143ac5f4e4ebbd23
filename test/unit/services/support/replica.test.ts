import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { allMigrations } from '../../../../src/services/domains.js';
import { HEARTBEAT_MS, Replica, STALE_MS } from '../../../../src/services/support/replica.js';
import { openStore, type Store } from '../../../../src/state/store.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

/** Replicas and the lead, on SQLite and on the machine's PostgreSQL (a database of the test's own). */
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const database = `sandboxd_replica_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
let made = false;
const opened: (Store | Replica)[] = [];
const dirs: string[] = [];

const store = async (databaseUrl?: string): Promise<Store> => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-replica-'));
  dirs.push(dir);
  const s = await openStore(dir, allMigrations(), { databaseUrl });
  opened.push(s);
  return s;
};
const replica = async (s: Store, options: Parameters<typeof Replica.start>[2] = {}): Promise<Replica> => {
  const r = await Replica.start(s, silentLogger(), options);
  opened.unshift(r);
  return r;
};
const postgres = async (): Promise<string> => {
  if (!made) await admin.query(`CREATE DATABASE ${database}`);
  made = true;
  return `${SERVER}/${database}`;
};
const until = async (check: () => boolean, ms: number) => {
  for (const deadline = Date.now() + ms; !check(); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
  }
};

afterEach(async () => {
  for (const item of opened.splice(0)) await item.close().catch(() => undefined);
});
afterAll(async () => {
  if (made) await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a replica', () => {
  it('on SQLite is the one server of its database and leads at once; its row goes at close', async () => {
    const s = await store();
    const r = await replica(s);
    expect(r.leading).toBe(true);
    let led = 0;
    r.onLead(() => led++);
    expect(led).toBe(1);
    await r.serving('http://127.0.0.1:1');
    expect(await r.live()).toEqual([expect.objectContaining({ id: r.id, pid: process.pid, url: 'http://127.0.0.1:1' })]);
    await r.close();
    expect(await s.db.selectFrom('replicas').selectAll().execute()).toEqual([]);
  });

  it('that starts on the data directory of one before takes its place: the one before is dead, however fresh its heartbeat', async () => {
    const s = await store();
    const before = await replica(s);
    const after = await replica(s);
    expect((await after.live()).map((row) => row.id)).toEqual([after.id]);
    expect(before.id).not.toBe(after.id);
  });

  it('lists only replicas whose heartbeat is fresh', async () => {
    const s = await store();
    let now = Date.now();
    const r = await replica(s, { now: () => now });
    await s.db.insertInto('replicas').values({ id: 'gone', host: 'h', data_dir: '/elsewhere', pid: 1, url: null, started_at: now - STALE_MS * 2, heartbeat_at: now - STALE_MS - 1 }).execute();
    expect((await r.live()).map((row) => row.id)).toEqual([r.id]);
    now += STALE_MS + 1;
    expect(await r.live()).toEqual([]);
  });

  it('on PostgreSQL: one of two leads, and the other takes the lead within a heartbeat of its close', async () => {
    const url = await postgres();
    const a = await replica(await store(url));
    const b = await replica(await store(url));
    expect([a.leading, b.leading]).toEqual([true, false]);
    expect((await b.live()).map((row) => row.id)).toEqual([a.id, b.id]);
    let bLed = 0;
    b.onLead(() => bLed++);
    await a.close();
    await until(() => b.leading, HEARTBEAT_MS * 2);
    expect(bLed).toBe(1);
    expect((await b.live()).map((row) => row.id)).toEqual([b.id]);
  });

  it("on PostgreSQL: a leader whose session ends is told it leads no longer, and another replica takes the lead", async () => {
    const url = await postgres();
    let lost = 0;
    const a = await replica(await store(url), { onLostLead: () => lost++ });
    const b = await replica(await store(url));
    expect(a.leading).toBe(true);
    // The leader's session, as a database restart or a killed process ends it.
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = $1)", [database]);
    await until(() => lost === 1, 5_000);
    expect(a.leading).toBe(false);
    // The server exits when told (onLostLead); the other replica takes the lead.
    await a.close();
    await until(() => b.leading, HEARTBEAT_MS * 2);
  });
});
