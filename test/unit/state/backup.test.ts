import Sqlite from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { allMigrations } from '../../../src/services/domains.js';
import { DatabaseNewerError } from '../../../src/state/migration-state.js';
import { MIGRATIONS } from '../../../src/state/migrations/index.js';
import { openStore, type Store } from '../../../src/state/store.js';
import { runCli } from '../../helpers/server-process.js';

const dirs: string[] = [];
const opened: Store[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-backup-'));
  dirs.push(dir);
  return dir;
};
/** A data directory as a running server holds it: its lock taken, every migration applied. */
const serving = async (dir = tempDir()) => {
  const store = await openStore(dir, allMigrations());
  opened.push(store);
  return store;
};
const stop = async (store: Store) => {
  opened.splice(opened.indexOf(store), 1);
  await store.close();
};
const cli = (...args: string[]) => runCli(args, { SANDBOXD_DATA_DIR: '', SERVICE_DATA_DIR: '' });
const rows = (dir: string, sql: string) => {
  const db = new Sqlite(join(dir, 'sandboxd.db'), { readonly: true });
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
};
/**
 * Every file under dir, with its digest, to show that a refused restore touched nothing (SQLite's
 * empty write-ahead log and its shared-memory index, which opening a database makes, aside).
 */
const contents = (dir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((path) => statSync(join(dir, path)).isFile() && !/^sandboxd\.(lock|pid)|-shm$/.test(path))
      .filter((path) => !(path.endsWith('-wal') && statSync(join(dir, path)).size === 0))
      .map((path) => [path, createHash('sha256').update(readFileSync(join(dir, path))).digest('hex')]),
  );

/** A backup of a data directory with a row in meta, an embedded store and a secret key. */
async function backupOf(): Promise<{ source: Store; backup: string }> {
  const source = await serving();
  writeFileSync(join(source.dataDir, 'secret.key'), Buffer.alloc(32, 7), { mode: 0o600 });
  mkdirSync(join(source.dataDir, 'stores'));
  const kv = new Sqlite(join(source.dataDir, 'stores', 'st_1.sqlite'));
  kv.exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT); INSERT INTO kv VALUES ('a', 'b')");
  kv.close();
  const backup = join(tempDir(), 'b');
  const done = await cli('backup', '--data-dir', source.dataDir, backup);
  expect(done.stderr).toBe('');
  expect(done.code).toBe(0);
  return { source, backup };
}

describe('sandboxd backup and restore', () => {
  it('copies a data directory while its server writes, consistently, and restores it into another with every file', async () => {
    const source = await serving();
    writeFileSync(join(source.dataDir, 'secret.key'), Buffer.alloc(32, 7), { mode: 0o600 });
    mkdirSync(join(source.dataDir, 'stores'));
    const kv = new Sqlite(join(source.dataDir, 'stores', 'st_1.sqlite'));
    kv.exec("PRAGMA journal_mode = WAL; CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT); INSERT INTO kv VALUES ('a', 'b')");
    // The server writes rows one after another, each in its own transaction, all the while.
    let written = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        await source.db.insertInto('meta').values({ key: `row-${String(written).padStart(6, '0')}`, value: 'x' }).execute();
        written++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const backup = join(tempDir(), 'b');
    const result = await cli('backup', '--data-dir', source.dataDir, backup);
    writing = false;
    await writer;
    kv.close();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^backed up .+ to .+: sandboxd\.db, stores\/st_1\.sqlite, secret\.key \(\d+ bytes\)\n$/);
    expect(written).toBeGreaterThan(0);

    const target = tempDir();
    const restored = await cli('restore', '--data-dir', target, backup);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    // A snapshot of one moment: the rows written before it, with no gap.
    const kept = (rows(target, "SELECT key FROM meta WHERE key LIKE 'row-%' ORDER BY key") as { key: string }[]).map((row) => row.key);
    expect(kept).toEqual(kept.map((_, i) => `row-${String(i).padStart(6, '0')}`));
    expect(readFileSync(join(target, 'secret.key'))).toEqual(Buffer.alloc(32, 7));
    expect(statSync(join(target, 'secret.key')).mode & 0o777).toBe(0o600);
    const store = new Sqlite(join(target, 'stores', 'st_1.sqlite'), { readonly: true });
    expect(store.prepare('SELECT k, v FROM kv').all()).toEqual([{ k: 'a', v: 'b' }]);
    store.close();
    const again = await serving(target);
    expect([again.deploymentId, again.networkName]).toEqual([source.deploymentId, source.networkName]);
  });

  it('moves the previous state of the data directory aside, never deleting it', async () => {
    const { backup } = await backupOf();
    const target = await serving();
    await target.db.insertInto('meta').values({ key: 'only-here', value: '1' }).execute();
    await stop(target);
    const result = await cli('restore', '--data-dir', target.dataDir, backup);
    expect(result.code).toBe(0);
    const aside = /previous files are in (before-restore-[^/]+)\//.exec(result.stdout)?.[1];
    expect(aside, result.stdout).toBeDefined();
    expect(rows(join(target.dataDir, aside ?? ''), "SELECT value FROM meta WHERE key = 'only-here'")).toEqual([{ value: '1' }]);
    expect(rows(target.dataDir, "SELECT value FROM meta WHERE key = 'only-here'")).toEqual([]);
  });

  it('refuses to restore into a data directory a server is using, and touches nothing', async () => {
    const { backup } = await backupOf();
    const target = await serving();
    const before = contents(target.dataDir);
    const result = await cli('restore', '--data-dir', target.dataDir, backup);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`data directory ${target.dataDir} is in use by another sandboxd process (pid ${process.pid})`);
    expect(contents(target.dataDir)).toEqual(before);
  });

  it('refuses a damaged or forged backup before touching the data directory, naming what is wrong', async () => {
    const target = await serving();
    await stop(target);
    const before = contents(target.dataDir);
    const manifestOf = (backup: string) => JSON.parse(readFileSync(join(backup, 'manifest.json'), 'utf8'));
    const refusals: [string, (backup: string) => void, string][] = [
      ['a flipped byte', (b) => {
        const data = readFileSync(join(b, 'sandboxd.db'));
        data.writeUInt8(data.readUInt8(data.length - 1) ^ 1, data.length - 1);
        writeFileSync(join(b, 'sandboxd.db'), data);
      }, 'sandboxd.db in the backup'],
      ['a path outside the backup', (b) => {
        const manifest = manifestOf(b);
        manifest.files.push({ path: '../../../etc/passwd', sha256: '0', bytes: 1 });
        writeFileSync(join(b, 'manifest.json'), JSON.stringify(manifest));
      }, 'names "../../../etc/passwd", which no backup holds'],
      ['a symbolic link for a file', (b) => {
        rmSync(join(b, 'secret.key'));
        symlinkSync('/etc/shadow', join(b, 'secret.key'));
      }, 'secret.key is missing from the backup'],
      ['no manifest', (b) => rmSync(join(b, 'manifest.json')), 'is not a sandboxd backup: it has no manifest.json'],
      ['a manifest that is not JSON', (b) => writeFileSync(join(b, 'manifest.json'), '{'), 'is not JSON'],
      ['a file that is not a database, with a matching checksum', (b) => {
        writeFileSync(join(b, 'stores', 'st_1.sqlite'), 'not a database at all, but long enough to be read as a header');
        const manifest = manifestOf(b);
        const entry = manifest.files.find((file: { path: string }) => file.path === 'stores/st_1.sqlite');
        entry.sha256 = createHash('sha256').update(readFileSync(join(b, 'stores', 'st_1.sqlite'))).digest('hex');
        writeFileSync(join(b, 'manifest.json'), JSON.stringify(manifest));
      }, 'stores/st_1.sqlite in the backup is not a SQLite database'],
    ];
    for (const [what, damage, message] of refusals) {
      const { backup, source } = await backupOf();
      await stop(source);
      damage(backup);
      const result = await cli('restore', '--data-dir', target.dataDir, backup);
      expect(result.code, what).toBe(2);
      expect(result.stderr, what).toContain(message);
      expect(contents(target.dataDir), what).toEqual(before);
    }
  });

  it('refuses a destination that is not a new or empty directory, and a data directory without a database', async () => {
    const source = await serving();
    const full = tempDir();
    writeFileSync(join(full, 'x'), 'x');
    const refused = await cli('backup', '--data-dir', source.dataDir, full);
    expect([refused.code, refused.stderr]).toEqual([2, `sandboxd: ${full} exists and is not an empty directory: name a new one\n`]);
    const empty = tempDir();
    const none = await cli('backup', '--data-dir', empty, join(tempDir(), 'b'));
    expect([none.code, none.stderr]).toEqual([2, `sandboxd: no sandboxd database in ${empty}: is --data-dir the server's?\n`]);
  });
});

describe('a database a newer sandboxd migrated', () => {
  const future = async () => {
    const store = await serving();
    await stop(store);
    const db = new Sqlite(join(store.dataDir, 'sandboxd.db'));
    db.prepare("INSERT INTO kysely_migration (name, timestamp) VALUES ('9999_future', '2030-01-01T00:00:00.000Z')").run();
    db.close();
    return store.dataDir;
  };

  it('is refused, unchanged, by openStore, serve, migrate and restore', async () => {
    const dir = await future();
    const before = contents(dir);
    await expect(openStore(dir, allMigrations())).rejects.toThrow(DatabaseNewerError);
    const expected = `the database ${join(dir, 'sandboxd.db')} was migrated by a newer sandboxd (migration 9999_future unknown to this version)`;
    for (const args of [['serve', '--backend', 'fake', '--port', '0'], ['migrate'], ['migrate', '--dry-run']]) {
      const result = await cli(...args, '--data-dir', dir);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toContain(expected);
    }
    expect(contents(dir)).toEqual(before);

    const backup = join(tempDir(), 'b');
    expect((await cli('backup', '--data-dir', dir, backup)).code).toBe(0);
    const target = tempDir();
    const restore = await cli('restore', '--data-dir', target, backup);
    expect(restore.code).toBe(2);
    expect(restore.stderr).toContain('was migrated by a newer sandboxd (migration 9999_future unknown to this version)');
    expect(existsSync(join(target, 'sandboxd.db'))).toBe(false);
  });
});

describe('sandboxd migrate', () => {
  it("applies the pending migrations and says which; --dry-run lists them and changes nothing", async () => {
    const dir = tempDir();
    // A data directory as the server before migration 0022 left it.
    const before = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < '0022'));
    await (await openStore(dir, before)).close();
    const pending = Object.keys(allMigrations()).filter((name) => !(name in before)).sort();
    const count = () => rows(dir, 'SELECT name FROM kysely_migration').length;
    const applied = count();

    const dry = await cli('migrate', '--dry-run', '--data-dir', dir);
    expect([dry.code, dry.stdout]).toEqual([0, `${join(dir, 'sandboxd.db')}: ${applied} applied; pending: ${pending.join(', ')}\n`]);
    expect(count()).toBe(applied);

    const run = await cli('migrate', '--data-dir', dir);
    expect([run.code, run.stdout]).toEqual([0, `applied ${pending.length}: ${pending.join(', ')}\n`]);
    expect((await cli('migrate', '--data-dir', dir)).stdout).toBe(`${join(dir, 'sandboxd.db')}: the database is up to date\n`);
    expect((await cli('migrate', '--dry-run', '--data-dir', dir)).stdout).toBe(`${join(dir, 'sandboxd.db')}: ${applied + pending.length} applied; up to date\n`);
  });

  it('refuses while a server uses the data directory', async () => {
    const store = await serving();
    const result = await cli('migrate', '--data-dir', store.dataDir);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('is in use by another sandboxd process');
  });
});
