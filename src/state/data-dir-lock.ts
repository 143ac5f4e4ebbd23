import Sqlite from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The file of a data directory's database (SQLite). */
export const databaseFile = (dataDir: string): string => join(dataDir, 'sandboxd.db');

/** The data directory is owned by another running process. */
export class DataDirLockedError extends Error {
  constructor(readonly dataDir: string, readonly ownerPid: number | undefined) {
    super(
      `data directory ${dataDir} is in use by another sandboxd process` +
        (ownerPid ? ` (pid ${ownerPid})` : '') +
        `: stop it, or give this one its own --data-dir`,
    );
    this.name = 'DataDirLockedError';
  }
}

/**
 * One process per data directory. The lock is an exclusive SQLite lock on `sandboxd.lock`:
 * the operating system drops it when the process dies, even by kill -9, so a crash never
 * leaves a stale lock behind. The owner's pid is written beside it for the error message.
 */
export class DataDirLock {
  private constructor(private readonly db: Sqlite.Database) {}

  static acquire(dataDir: string): DataDirLock {
    const db = new Sqlite(join(dataDir, 'sandboxd.lock'), { timeout: 0 });
    try {
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('CREATE TABLE IF NOT EXISTS owner (pid INTEGER)');
      db.exec('BEGIN EXCLUSIVE');
      db.exec('COMMIT');
    } catch (err) {
      db.close();
      if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) {
        throw new DataDirLockedError(dataDir, readOwnerPid(dataDir));
      }
      throw err;
    }
    writeFileSync(join(dataDir, 'sandboxd.pid'), `${process.pid}\n`);
    return new DataDirLock(db);
  }

  release(): void {
    if (this.db.open) this.db.close();
  }
}

function readOwnerPid(dataDir: string): number | undefined {
  try {
    return Number.parseInt(readFileSync(join(dataDir, 'sandboxd.pid'), 'utf8'), 10) || undefined;
  } catch {
    return undefined;
  }
}
