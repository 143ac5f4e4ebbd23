import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { startRuntime } from '../../src/runtime.js';
import { allMigrations } from '../../src/services/domains.js';
import { SecretKeyError } from '../../src/services/support/secret-box.js';
import { openStore } from '../../src/state/store.js';
import { HEARTBEAT_MS } from '../../src/services/support/replica.js';
import { silentLogger } from '../../src/telemetry/logger.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-runtime-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const configFor = (dataDir: string, secretKeyFile?: string) =>
  loadConfig({ env: {}, flags: { dataDir, backend: 'fake', poolSize: '0', ...(secretKeyFile ? { secretKeyFile } : {}) } });

describe('startRuntime', () => {
  it('starts the timers driver after recovery and stops it at close', async () => {
    const runtime = await startRuntime(configFor(tempDir()), silentLogger(), { listen: false });
    const { timers } = runtime.services;
    let ticks = 0;
    timers.register({ name: 'probe', nextDue: () => new Date(0), tick: () => void ticks++ });
    await timers.poke();
    await timers.tick();
    expect(ticks).toBeGreaterThan(0);
    expect(timers.nextWake).toBeDefined();
    await runtime.close();
    expect(timers.nextWake).toBeUndefined();
    const before = ticks;
    await timers.tick();
    expect(ticks).toBe(before);
  });

  it('records a schedule run the last process left running as interrupted before the timers start', async () => {
    const dataDir = tempDir();
    const first = await startRuntime(configFor(dataDir), silentLogger(), { listen: false });
    const created = await first.services.schedules.create({ name: 'job', method: 'run', cron: '@yearly', args: { command: ['true'] } });
    await first.close();
    // What a kill -9 during a run leaves: the claimed run still marked running.
    const store = await openStore(dataDir, allMigrations());
    await store.sql.run(
      "INSERT INTO schedule_runs (id, schedule_id, scheduled_for, started_at, status, missed_count) VALUES ('r1', ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 'running', 0)",
      [created.id],
    );
    await store.close();
    const second = await startRuntime(configFor(dataDir), silentLogger(), { listen: false });
    expect(await second.services.schedules.runs('job', { limit: 10 })).toMatchObject([{ id: 'r1', status: 'interrupted' }]);
    await second.close();
  });

  it('refuses a key file open to others at start, and lets the data directory go', async () => {
    const dataDir = tempDir();
    const keyFile = join(tempDir(), 'sandboxd.key');
    writeFileSync(keyFile, Buffer.alloc(32, 9));
    chmodSync(keyFile, 0o644);
    const refused = startRuntime(configFor(dataDir, keyFile), silentLogger(), { listen: false });
    await expect(refused).rejects.toThrow(SecretKeyError);
    await expect(refused).rejects.toThrow(`run chmod 600 ${keyFile}`);
    const store = await openStore(dataDir, allMigrations());
    await store.close();

    chmodSync(keyFile, 0o600);
    const runtime = await startRuntime(configFor(dataDir, keyFile), silentLogger(), { listen: false });
    expect(runtime.services.secrets.keyFile).toBe(keyFile);
    const sealed = runtime.services.secrets.seal('hunter2', 'test');
    expect(runtime.services.secrets.open(sealed, 'test')).toBe('hunter2');
    await runtime.close();
  });
});

describe('startRuntime of replicas on one PostgreSQL database', () => {
  const SERVER = 'postgres://postgres@127.0.0.1:5432';
  const database = `sandboxd_runtime_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  it('runs the timers on the leader only; the other starts them when it takes the lead', async () => {
    await admin.query(`CREATE DATABASE ${database}`);
    const keyFile = join(tempDir(), 'shared.key');
    writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
    const replicaConfig = () => ({ ...configFor(tempDir(), keyFile), databaseUrl: `${SERVER}/${database}` });
    const leader = await startRuntime(replicaConfig(), silentLogger(), { listen: false });
    const follower = await startRuntime(replicaConfig(), silentLogger(), { listen: false });
    try {
      expect(leader.deploymentId).toBe(follower.deploymentId);
      expect(leader.services.timers.nextWake).toBeDefined();
      expect(follower.services.timers.nextWake).toBeUndefined();
      // What one replica writes, the other reads.
      await leader.services.schedules.create({ name: 'shared', method: 'run', cron: '@yearly', args: { command: ['true'] } });
      expect((await follower.services.schedules.list({ limit: 10 })).map((schedule) => schedule.name)).toEqual(['shared']);
      await leader.close();
      for (const deadline = Date.now() + 2 * HEARTBEAT_MS; follower.services.timers.nextWake === undefined; await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() > deadline) throw new Error('the follower did not take the lead within two heartbeats');
      }
    } finally {
      await follower.close();
    }
  });
});
