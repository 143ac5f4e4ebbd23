import Sqlite from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Migration } from 'kysely';
import { VERSION } from '../paths.js';
import { DataDirLock, databaseFile } from './data-dir-lock.js';
import { readMigrationState } from './migration-state.js';

/**
 * Backups of a data directory that uses the embedded SQLite: `sandboxd backup DIR` while the
 * server runs, `sandboxd restore DIR` while it does not. A backup is a directory of plain files
 * and a manifest with each one's SHA-256: the database, the embedded stores (kv and queue, one
 * SQLite file each), the key that encrypts secrets at rest, and the self-signed TLS files.
 */

/** A backup or restore that cannot be done as asked: the message says why and what to do. */
export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupError';
  }
}

const FORMAT = 'sandboxd-backup/1';
const MANIFEST = 'manifest.json';
const DATABASE = 'sandboxd.db';
const SECRET_KEY = 'secret.key';
/** The only paths a backup holds, besides its manifest: a manifest naming any other is refused. */
const BACKUP_PATH = /^(sandboxd\.db|secret\.key|stores\/[0-9a-zA-Z_-]{1,64}\.sqlite|tls\/(cert|key)\.pem)$/;
const isDatabase = (path: string) => path === DATABASE || path.startsWith('stores/');

export interface BackupManifest {
  format: typeof FORMAT;
  /** The sandboxd version that made it. */
  version: string;
  created_at: string;
  deployment_id: string;
  /** The migrations its database had recorded. */
  migrations: string[];
  /** Each file's path in the backup (and in the data directory, but the key's) and SHA-256. */
  files: { path: string; sha256: string; bytes: number }[];
}

/** Where the secret key lives: the configured file, else `<data-dir>/secret.key`. */
export interface KeyLocation {
  dataDir: string;
  secretKeyFile?: string | undefined;
  /** Set when the state is in PostgreSQL: these commands refuse, pg_dump and pg_restore serve. */
  databaseUrl?: string | undefined;
}

/** Backups and restores here are of the embedded SQLite: a PostgreSQL database has its own tools. */
function refusePostgres(where: KeyLocation): void {
  if (where.databaseUrl) {
    throw new BackupError(
      'the state is in PostgreSQL (--database-url): back it up with pg_dump --format=custom and restore it with pg_restore, ' +
        'with the secret key file beside it (docs/operations.md, "Backups")',
    );
  }
}
const keyFileOf = (where: KeyLocation) => where.secretKeyFile ?? join(where.dataDir, SECRET_KEY);

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** A consistent copy of a SQLite database that others may be writing: one read transaction (VACUUM INTO). */
function copyDatabase(from: string, to: string): void {
  const sqlite = new Sqlite(from, { fileMustExist: true });
  try {
    sqlite.pragma('busy_timeout = 5000');
    sqlite.prepare('VACUUM INTO ?').run(to);
  } finally {
    sqlite.close();
  }
}

/**
 * Writes a backup of the data directory into `dest` (a new or empty directory), online: the
 * server may run and write meanwhile. Each database is copied in one read transaction, so each
 * is consistent on its own; the database and the stores are copied one after another.
 */
export function backupDataDir(where: KeyLocation, dest: string): BackupManifest {
  refusePostgres(where);
  const { dataDir } = where;
  if (!existsSync(databaseFile(dataDir))) throw new BackupError(`no sandboxd database in ${dataDir}: is --data-dir the server's?`);
  if (existsSync(dest) && (!lstatSync(dest).isDirectory() || readdirSync(dest).length > 0)) {
    throw new BackupError(`${dest} exists and is not an empty directory: name a new one`);
  }
  mkdirSync(join(dest, 'stores'), { recursive: true, mode: 0o700 });
  const files: BackupManifest['files'] = [];
  const add = (path: string, copy: (to: string) => void) => {
    const to = join(dest, path);
    copy(to);
    files.push({ path, sha256: sha256(to), bytes: lstatSync(to).size });
  };
  add(DATABASE, (to) => copyDatabase(databaseFile(dataDir), to));
  const storesDir = join(dataDir, 'stores');
  const stores = existsSync(storesDir) ? readdirSync(storesDir).filter((name) => BACKUP_PATH.test(`stores/${name}`)) : [];
  for (const name of stores.sort()) add(`stores/${name}`, (to) => copyDatabase(join(storesDir, name), to));
  const keyFile = keyFileOf(where);
  if (existsSync(keyFile)) add(SECRET_KEY, (to) => copyFileSync(keyFile, to));
  for (const name of ['cert.pem', 'key.pem']) {
    const file = join(dataDir, 'tls', name);
    if (existsSync(file)) {
      mkdirSync(join(dest, 'tls'), { recursive: true, mode: 0o700 });
      add(`tls/${name}`, (to) => copyFileSync(file, to));
    }
  }
  const database = readDatabase(join(dest, DATABASE));
  const manifest: BackupManifest = {
    format: FORMAT,
    version: VERSION,
    created_at: new Date().toISOString(),
    deployment_id: database.deploymentId,
    migrations: database.migrations,
    files,
  };
  writeFileSync(join(dest, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  return manifest;
}

/** The deployment id and recorded migrations of a database file (a backup's copy). */
function readDatabase(file: string): { deploymentId: string; migrations: string[] } {
  const sqlite = new Sqlite(file, { readonly: true, fileMustExist: true });
  try {
    const row = sqlite.prepare("SELECT value FROM meta WHERE key = 'deployment_id'").get() as { value: string } | undefined;
    const migrations = (sqlite.prepare('SELECT name FROM kysely_migration ORDER BY name').all() as { name: string }[]).map((r) => r.name);
    return { deploymentId: row?.value ?? '', migrations };
  } finally {
    sqlite.close();
  }
}

/** Reads and checks a backup: its manifest, every file's checksum, each database's integrity, and that this version knows its migrations. */
async function verifyBackup(src: string, migrations: Record<string, Migration>): Promise<BackupManifest> {
  const manifestFile = join(src, MANIFEST);
  if (!existsSync(manifestFile)) throw new BackupError(`${src} is not a sandboxd backup: it has no ${MANIFEST}`);
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as BackupManifest;
  } catch {
    throw new BackupError(`${manifestFile} is not JSON: the backup is damaged`);
  }
  if (manifest?.format !== FORMAT || !Array.isArray(manifest.files)) throw new BackupError(`${manifestFile} is not a ${FORMAT} manifest`);
  if (!manifest.files.some((file) => file?.path === DATABASE)) throw new BackupError(`the backup ${src} has no ${DATABASE}`);
  for (const file of manifest.files) {
    if (typeof file?.path !== 'string' || !BACKUP_PATH.test(file.path)) throw new BackupError(`the manifest of ${src} names ${JSON.stringify(file?.path)}, which no backup holds`);
    const path = join(src, file.path);
    if (!existsSync(path) || !lstatSync(path).isFile()) throw new BackupError(`${file.path} is missing from the backup ${src} (or is not a plain file)`);
    if (sha256(path) !== file.sha256) throw new BackupError(`${file.path} in the backup ${src} does not match its checksum: the backup is damaged`);
    if (isDatabase(file.path)) checkIntegrity(path, file.path);
  }
  await readMigrationState(join(src, DATABASE), migrations);
  return manifest;
}

function checkIntegrity(file: string, name: string): void {
  const sqlite = new Sqlite(file, { readonly: true, fileMustExist: true });
  try {
    const result = sqlite.pragma('integrity_check', { simple: true });
    if (result !== 'ok') throw new BackupError(`${name} in the backup fails SQLite's integrity check (${String(result)})`);
  } catch (err) {
    if (err instanceof BackupError) throw err;
    throw new BackupError(`${name} in the backup is not a SQLite database (${(err as Error).message})`);
  } finally {
    sqlite.close();
  }
}

/** Moves a file or directory, also to another file system (a key file configured elsewhere). */
function moveAside(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
  try {
    renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    copyFileSync(from, to);
    rmSync(from);
  }
}

export interface RestoreResult {
  manifest: BackupManifest;
  /** Where the data directory's previous files were moved, if it had any. */
  previous?: string;
}

/**
 * Restores a backup into the data directory, which no server may be using (its lock is taken:
 * DataDirLockedError otherwise). The backup is checked whole before anything is touched; the
 * directory's previous database, stores, key and TLS files are moved aside into
 * `<data-dir>/before-restore-<time>/`, never deleted. The next `serve` applies this version's
 * pending migrations and reconciles: sandboxes whose containers are gone are lost, containers the
 * restored database does not know are removed by the orphan sweep.
 */
export async function restoreDataDir(where: KeyLocation, src: string, migrations: Record<string, Migration>): Promise<RestoreResult> {
  refusePostgres(where);
  const manifest = await verifyBackup(src, migrations);
  const { dataDir } = where;
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lock = DataDirLock.acquire(dataDir);
  try {
    const keyFile = keyFileOf(where);
    const previous = join(dataDir, `before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    const current = [
      ...[DATABASE, `${DATABASE}-wal`, `${DATABASE}-shm`, 'stores', 'tls'].map((name) => ({ from: join(dataDir, name), to: join(previous, name) })),
      { from: keyFile, to: join(previous, SECRET_KEY) },
    ].filter((move) => existsSync(move.from));
    for (const move of current) moveAside(move.from, move.to);
    for (const file of manifest.files) {
      const to = file.path === SECRET_KEY ? keyFile : join(dataDir, file.path);
      mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
      copyFileSync(join(src, file.path), to);
    }
    return { manifest, ...(current.length > 0 ? { previous: basename(previous) } : {}) };
  } finally {
    lock.release();
  }
}
