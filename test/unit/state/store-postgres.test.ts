import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load-config.js';
import { allMigrations } from '../../../src/services/domains.js';
import { backupDataDir } from '../../../src/state/backup.js';
import { DatabaseNewerError, migrationReport } from '../../../src/state/migration-state.js';
import { DatabaseUnreachableError, redactedUrl } from '../../../src/state/postgres.js';
import { openStore } from '../../../src/state/store.js';
import { runCli } from '../../helpers/server-process.js';

/**
 * The state store on the machine's PostgreSQL (trust auth on 127.0.0.1:5432), in databases of the
 * test's own: what `--database-url` opens, and what the data commands do with it.
 */
const SERVER = 'postgres://postgres@127.0.0.1:5432';
const prefix = `sandboxd_store_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: `${SERVER}/postgres`, max: 1 });
const made: string[] = [];
const dirs: string[] = [];

const database = async (): Promise<string> => {
  const name = `${prefix}_${made.length}`;
  await admin.query(`CREATE DATABASE ${name}`);
  made.push(name);
  return `${SERVER}/${name}`;
};
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-store-pg-'));
  dirs.push(dir);
  return dir;
};

beforeAll(async () => {
  await admin.query('SELECT 1');
});
afterAll(async () => {
  for (const name of made) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a store on PostgreSQL', () => {
  it('applies every migration once, and its replicas (data directories of their own) share one deployment', async () => {
    const url = await database();
    // Two replicas opening a new database at once: the migrations run once, one deployment id wins.
    const [a, b] = await Promise.all([openStore(dataDir(), allMigrations(), { databaseUrl: url }), openStore(dataDir(), allMigrations(), { databaseUrl: url })]);
    try {
      expect(a.sql.engine).toBe('postgres');
      expect(a.location).toBe(url);
      expect([...a.migrated, ...b.migrated].sort()).toEqual(Object.keys(allMigrations()).sort());
      expect(b.deploymentId).toBe(a.deploymentId);
      expect(b.networkName).toBe(a.networkName);
      const tables = await a.sql.all<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
      expect(tables.map((row) => row.table_name)).toEqual(expect.arrayContaining(['sandboxes', 'objects', 'orchestrations', 'schedules', 'policy_audit', 'proxy_decisions']));
    } finally {
      await a.close();
      await b.close();
    }
    const again = await openStore(dataDir(), allMigrations(), { databaseUrl: url });
    expect(again.migrated).toEqual([]);
    expect(again.deploymentId).toBe(a.deploymentId);
    await again.close();
    expect(await migrationReport(dataDir(), allMigrations(), url)).toBe(`${url}: ${Object.keys(allMigrations()).length} applied; up to date\n`);
  });

  it('refuses a database it cannot reach, naming the URL without its password, and leaves the data directory free', async () => {
    const url = 'postgres://sandboxd:hunter2hunter2@127.0.0.1:1/sandboxd';
    expect(redactedUrl(url)).toBe('postgres://sandboxd:***@127.0.0.1:1/sandboxd');
    const dir = dataDir();
    const refused = await openStore(dir, allMigrations(), { databaseUrl: url }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(DatabaseUnreachableError);
    expect((refused as Error).message).toMatch(/^cannot reach the database postgres:\/\/sandboxd:\*\*\*@127\.0\.0\.1:1\/sandboxd: .*ECONNREFUSED/);
    expect((refused as Error).message).not.toContain('hunter2');
    // The lock went with the refusal: a store on SQLite opens the same directory.
    await (await openStore(dir)).close();
    // A database that does not exist is named as the server names it.
    const missing = await openStore(dataDir(), allMigrations(), { databaseUrl: `${SERVER}/${prefix}_absent` }).catch((err: unknown) => err);
    expect((missing as Error).message).toContain(`database "${prefix}_absent" does not exist`);
  });

  it('refuses a database a newer sandboxd migrated, unchanged', async () => {
    const url = await database();
    await (await openStore(dataDir(), allMigrations(), { databaseUrl: url })).close();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("INSERT INTO kysely_migration (name, timestamp) VALUES ('9999_future', '2030-01-01T00:00:00.000Z')");
    await client.end();
    const refused = await openStore(dataDir(), allMigrations(), { databaseUrl: url }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(DatabaseNewerError);
    expect((refused as Error).message).toContain('9999_future');
    await expect(migrationReport(dataDir(), allMigrations(), url)).rejects.toThrow(/9999_future/);
  });

  it('takes the URL from --database-url, SERVICE_DATABASE_URL or [state].database_url, and refuses one that is not postgres://', () => {
    const dir = dataDir();
    expect(loadConfig({ flags: { dataDir: dir, databaseUrl: 'postgres://a@h/db' }, env: {} }).databaseUrl).toBe('postgres://a@h/db');
    expect(loadConfig({ flags: { dataDir: dir }, env: { SERVICE_DATABASE_URL: 'postgresql://a@h/db' } }).databaseUrl).toBe('postgresql://a@h/db');
    expect(() => loadConfig({ flags: { dataDir: dir, databaseUrl: 'mysql://a@h/db' }, env: {} })).toThrow(/database-url.*must be a postgres:\/\/ URL/);
  });

  it('leaves backups to pg_dump: backup and restore refuse, naming it; migrate applies and --dry-run reports on the database', async () => {
    const url = await database();
    expect(() => backupDataDir({ dataDir: dataDir(), databaseUrl: url }, join(dataDir(), 'backup'))).toThrow(/pg_dump --format=custom/);
    const dir = dataDir();
    const env = { SERVICE_DATABASE_URL: url };
    const dry = await runCli(['migrate', '--dry-run', '--data-dir', dir], env);
    expect(dry).toMatchObject({ code: 0, stdout: `${url}: no database yet; the first serve or migrate applies all ${Object.keys(allMigrations()).length} migrations\n` });
    const applied = await runCli(['migrate', '--data-dir', dir], env);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(new RegExp(`^applied ${Object.keys(allMigrations()).length}: 0001`));
    expect((await runCli(['migrate', '--data-dir', dir], env)).stdout).toBe(`${url}: the database is up to date\n`);
    const backup = await runCli(['backup', join(dir, 'copy'), '--data-dir', dir], env);
    expect(backup.code).toBe(2);
    expect(backup.stderr).toContain('sandboxd: the state is in PostgreSQL (--database-url): back it up with pg_dump');
    const restore = await runCli(['restore', join(dir, 'copy'), '--data-dir', dir], env);
    expect(restore.code).toBe(2);
    const unreachable = await runCli(['migrate', '--data-dir', dataDir(), '--database-url', 'postgres://x:secret-pw@127.0.0.1:1/db']);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toContain('sandboxd: cannot reach the database postgres://x:***@127.0.0.1:1/db');
    expect(unreachable.stderr).not.toContain('secret-pw');
  });
});
