import Sqlite from 'better-sqlite3';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { ServiceError } from '../../../../../errors.js';
import type { StoreTarget } from '../../store-engine.js';

/**
 * The SQLite file behind a kv or queue store on the host (`<data-dir>/stores/<id>.sqlite`),
 * opened in-process: these kinds run only statements written here, each bounded, so they need
 * none of the child processes that guard `sqlite`-kind SQL.
 */

/** Files SQLite keeps beside the store's file in WAL mode. */
const COMPANIONS = ['', '-wal', '-shm'];

/**
 * Opens the store's file and applies `schema` (idempotent DDL). `create` makes the file (and
 * its directory, 0700) when missing; without it a missing file is 503 STORE_UNAVAILABLE, since
 * making an empty store in place of a lost one would hide the loss.
 */
export function openStoreFile(target: StoreTarget, schema: string, create: boolean): Sqlite.Database {
  if (create) mkdirSync(dirname(target.file), { recursive: true, mode: 0o700 });
  let db: Sqlite.Database | undefined;
  try {
    db = new Sqlite(target.file, { fileMustExist: !create });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.exec(schema);
    return db;
  } catch (err) {
    db?.close();
    // SQLite's messages name no path ("file is not a database"); the data directory stays private.
    const reason = (err as { code?: string }).code === 'SQLITE_CANTOPEN' ? 'its file is missing' : (err as Error).message;
    throw new ServiceError('STORE_UNAVAILABLE', `${target.kind} store '${target.name}' cannot be opened: ${reason}`);
  }
}

/** Creates the store's file with its schema (at `prepare`). */
export function createStoreFile(target: StoreTarget, schema: string): void {
  openStoreFile(target, schema, true).close();
}

/** Deletes the store's file and its WAL companions; missing files are fine. */
export function removeStoreFile(file: string): void {
  for (const suffix of COMPANIONS) rmSync(file + suffix, { force: true });
}

/** Bytes on disk now: the file and its WAL companions. */
export function storeFileBytes(file: string): number {
  let bytes = 0;
  for (const suffix of COMPANIONS) bytes += statSync(file + suffix, { throwIfNoEntry: false })?.size ?? 0;
  return bytes;
}
