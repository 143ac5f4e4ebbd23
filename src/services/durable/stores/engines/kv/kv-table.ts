import type Sqlite from 'better-sqlite3';

/**
 * The kv store's file: one table of keys with their JSON values and expiry times (ms since
 * the epoch), and one row that triggers keep at the number of keys and the bytes of keys and
 * values, so that the size limit and DBSIZE never count the table. A key whose `expires_at` has
 * passed is absent for every command and deleted by the sweep.
 */
export const KV_SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, expires_at INTEGER);
CREATE INDEX IF NOT EXISTS kv_expires ON kv (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS kv_usage (id INTEGER PRIMARY KEY CHECK (id = 1), keys INTEGER NOT NULL, bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO kv_usage VALUES (1, 0, 0);
CREATE TRIGGER IF NOT EXISTS kv_inserted AFTER INSERT ON kv BEGIN
  UPDATE kv_usage SET keys = keys + 1, bytes = bytes + octet_length(NEW.key) + octet_length(NEW.value);
END;
CREATE TRIGGER IF NOT EXISTS kv_deleted AFTER DELETE ON kv BEGIN
  UPDATE kv_usage SET keys = keys - 1, bytes = bytes - octet_length(OLD.key) - octet_length(OLD.value);
END;
CREATE TRIGGER IF NOT EXISTS kv_updated AFTER UPDATE OF value ON kv BEGIN
  UPDATE kv_usage SET bytes = bytes + octet_length(NEW.value) - octet_length(OLD.value);
END;
`;

const LIVE = '(expires_at IS NULL OR expires_at > @now)';

/** A live key's row. */
export interface KvRow {
  value: string;
  expires_at: number | null;
}

/** Prepared statements over the kv table; every method takes the time `now` in ms. */
export class KvTable {
  private readonly statements;

  constructor(private readonly db: Sqlite.Database) {
    const prepare = (sql: string) => db.prepare(sql);
    this.statements = {
      row: prepare(`SELECT value, expires_at FROM kv WHERE key = @key AND ${LIVE}`),
      has: prepare(`SELECT 1 FROM kv WHERE key = @key AND ${LIVE}`).pluck(),
      put: prepare(
        'INSERT INTO kv (key, value, expires_at) VALUES (@key, @value, @expires_at) ' +
          'ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at',
      ),
      delete: prepare(`DELETE FROM kv WHERE key = @key AND ${LIVE}`),
      expire: prepare(`UPDATE kv SET expires_at = @expires_at WHERE key = @key AND ${LIVE}`),
      keysFrom: prepare(`SELECT key FROM kv WHERE key >= @start AND ${LIVE} ORDER BY key LIMIT @limit`).pluck(),
      keysAfter: prepare(`SELECT key FROM kv WHERE key > @start AND ${LIVE} ORDER BY key LIMIT @limit`).pluck(),
      usage: prepare('SELECT keys, bytes FROM kv_usage'),
      expiredCount: prepare('SELECT count(*) FROM kv WHERE expires_at <= @now').pluck(),
      deleteExpired: prepare('DELETE FROM kv WHERE rowid IN (SELECT rowid FROM kv WHERE expires_at <= @now LIMIT @limit)'),
    };
  }

  /** Runs `work` in one transaction: IMMEDIATE for writes, so no other connection writes in between. */
  transaction<T>(writes: boolean, work: () => T): T {
    const transaction = this.db.transaction(work);
    return writes ? transaction.immediate() : transaction.deferred();
  }

  row(key: string, now: number): KvRow | undefined {
    return this.statements.row.get({ key, now }) as KvRow | undefined;
  }

  /** Whether a key is live, without reading its value. */
  has(key: string, now: number): boolean {
    return this.statements.has.get({ key, now }) !== undefined;
  }

  /** Sets a key's value (JSON text) and expiry, whatever it held before. */
  put(key: string, value: string, expiresAt: number | null): void {
    this.statements.put.run({ key, value, expires_at: expiresAt });
  }

  /** Deletes a live key; whether there was one. */
  delete(key: string, now: number): boolean {
    return this.statements.delete.run({ key, now }).changes > 0;
  }

  /** Sets a live key's expiry (null: none); whether there was one. */
  expire(key: string, expiresAt: number | null, now: number): boolean {
    return this.statements.expire.run({ key, expires_at: expiresAt, now }).changes > 0;
  }

  /** Up to `limit` live keys in key order, from `start` (inclusive) or after it. */
  keys(start: string, inclusive: boolean, limit: number, now: number): string[] {
    const statement = inclusive ? this.statements.keysFrom : this.statements.keysAfter;
    return statement.all({ start, limit, now }) as string[];
  }

  /** Bytes of keys and values, expired ones included until they are swept. */
  bytes(): number {
    return (this.statements.usage.get() as { bytes: number }).bytes;
  }

  /** Live keys. */
  size(now: number): number {
    const { keys } = this.statements.usage.get() as { keys: number };
    return keys - (this.statements.expiredCount.get({ now }) as number);
  }

  /** Deletes up to `limit` expired keys; how many it deleted. */
  deleteExpired(now: number, limit: number): number {
    return this.statements.deleteExpired.run({ now, limit }).changes;
  }

  /** Deletes every key: the table is dropped and made again, which costs far less than deleting row by row. */
  flush(): void {
    this.db.exec('DROP TABLE kv');
    this.db.exec(KV_SCHEMA);
    this.db.exec('UPDATE kv_usage SET keys = 0, bytes = 0');
  }
}
