import type Sqlite from 'better-sqlite3';

/**
 * The queue store's file. A message's state is not stored but follows from its row, the time
 * and `config.max_attempts`, so that no timer has to move messages between states:
 *
 * | state     | condition                                        |
 * |-----------|--------------------------------------------------|
 * | ready     | visible_at <= now and attempts < max_attempts    |
 * | dead      | visible_at <= now and attempts >= max_attempts   |
 * | in flight | visible_at > now and receipt set (delivered)     |
 * | delayed   | visible_at > now and no receipt (DELAY, NACK)    |
 *
 * A delivery sets a fresh receipt; ACK, NACK and EXTEND match the receipt, so the receipt of
 * an earlier delivery matches nothing. `seq` orders messages of equal priority first in,
 * first out. Triggers keep the number of messages and the bytes of their bodies in one row.
 */
export const QUEUE_SCHEMA = `
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  body TEXT NOT NULL,
  priority INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  visible_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  receipt TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS messages_order ON messages (priority DESC, seq);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at);
CREATE INDEX IF NOT EXISTS messages_enqueued ON messages (enqueued_at);
CREATE TABLE IF NOT EXISTS dedup (dedup_id TEXT PRIMARY KEY NOT NULL, message_id TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS dedup_expires ON dedup (expires_at);
CREATE TABLE IF NOT EXISTS queue_usage (id INTEGER PRIMARY KEY CHECK (id = 1), messages INTEGER NOT NULL, bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO queue_usage VALUES (1, 0, 0);
CREATE TRIGGER IF NOT EXISTS messages_inserted AFTER INSERT ON messages BEGIN
  UPDATE queue_usage SET messages = messages + 1, bytes = bytes + octet_length(NEW.body);
END;
CREATE TRIGGER IF NOT EXISTS messages_deleted AFTER DELETE ON messages BEGIN
  UPDATE queue_usage SET messages = messages - 1, bytes = bytes - octet_length(OLD.body);
END;
`;

/** A message as PEEK and DEAD show it (times in ms; the command layer formats them). */
export interface MessageRow {
  seq: number;
  id: string;
  body: string;
  priority: number;
  attempts: number;
  enqueued_at: number;
}

export interface QueueCounts {
  ready: number;
  in_flight: number;
  delayed: number;
  dead: number;
}

const COLUMNS = 'seq, id, body, priority, attempts, enqueued_at';

/** Prepared statements over the queue's tables; times in ms since the epoch. */
export class QueueTable {
  private readonly statements;

  constructor(private readonly db: Sqlite.Database) {
    const prepare = (sql: string) => db.prepare(sql);
    this.statements = {
      insert: prepare(
        'INSERT INTO messages (id, body, priority, enqueued_at, visible_at, attempts) VALUES (@id, @body, @priority, @now, @visible_at, 0)',
      ),
      ready: prepare(`SELECT ${COLUMNS} FROM messages WHERE visible_at <= @now AND attempts < @max ORDER BY priority DESC, seq LIMIT @limit`),
      dead: prepare(`SELECT ${COLUMNS} FROM messages WHERE visible_at <= @now AND attempts >= @max ORDER BY priority DESC, seq LIMIT @limit`),
      deliver: prepare('UPDATE messages SET attempts = attempts + 1, visible_at = @visible_at, receipt = @receipt WHERE seq = @seq'),
      ack: prepare('DELETE FROM messages WHERE receipt = @receipt'),
      nack: prepare('UPDATE messages SET visible_at = @visible_at, receipt = NULL WHERE receipt = @receipt'),
      extend: prepare('UPDATE messages SET visible_at = @visible_at WHERE receipt = @receipt'),
      redrive: prepare('UPDATE messages SET attempts = 0, receipt = NULL WHERE visible_at <= @now AND attempts >= @max'),
      counts: prepare(
        'SELECT coalesce(sum(visible_at <= @now AND attempts < @max), 0) AS ready, ' +
          'coalesce(sum(visible_at > @now AND receipt IS NOT NULL), 0) AS in_flight, ' +
          'coalesce(sum(visible_at > @now AND receipt IS NULL), 0) AS delayed, ' +
          'coalesce(sum(visible_at <= @now AND attempts >= @max), 0) AS dead FROM messages',
      ),
      nextVisible: prepare('SELECT min(visible_at) FROM messages WHERE visible_at > @now').pluck(),
      usage: prepare('SELECT messages, bytes FROM queue_usage'),
      dedupFind: prepare('SELECT message_id FROM dedup WHERE dedup_id = @dedup_id AND expires_at > @now').pluck(),
      dedupPut: prepare(
        'INSERT INTO dedup (dedup_id, message_id, expires_at) VALUES (@dedup_id, @message_id, @expires_at) ' +
          'ON CONFLICT (dedup_id) DO UPDATE SET message_id = excluded.message_id, expires_at = excluded.expires_at',
      ),
      deleteOld: prepare('DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE enqueued_at <= @before LIMIT @limit)'),
      deleteOldDedup: prepare('DELETE FROM dedup WHERE dedup_id IN (SELECT dedup_id FROM dedup WHERE expires_at <= @now LIMIT @limit)'),
    };
  }

  /** Runs `work` in one transaction: IMMEDIATE for writes, so no other connection writes in between. */
  transaction<T>(writes: boolean, work: () => T): T {
    const transaction = this.db.transaction(work);
    return writes ? transaction.immediate() : transaction.deferred();
  }

  insert(message: { id: string; body: string; priority: number; now: number; visibleAt: number }): void {
    const { id, body, priority, now, visibleAt } = message;
    this.statements.insert.run({ id, body, priority, now, visible_at: visibleAt });
  }

  /** Ready messages in delivery order: highest priority first, then first in. */
  ready(now: number, maxAttempts: number, limit: number): MessageRow[] {
    return this.statements.ready.all({ now, max: maxAttempts, limit }) as MessageRow[];
  }

  dead(now: number, maxAttempts: number, limit: number): MessageRow[] {
    return this.statements.dead.all({ now, max: maxAttempts, limit }) as MessageRow[];
  }

  /** Marks a message delivered: one more attempt, hidden until `visibleAt`, this receipt. */
  deliver(seq: number, receipt: string, visibleAt: number): void {
    this.statements.deliver.run({ seq, receipt, visible_at: visibleAt });
  }

  ack(receipt: string): boolean {
    return this.statements.ack.run({ receipt }).changes > 0;
  }

  /** Gives a delivered message back, visible at `visibleAt`; its receipt stops matching. */
  nack(receipt: string, visibleAt: number): boolean {
    return this.statements.nack.run({ receipt, visible_at: visibleAt }).changes > 0;
  }

  extend(receipt: string, visibleAt: number): boolean {
    return this.statements.extend.run({ receipt, visible_at: visibleAt }).changes > 0;
  }

  /** Dead letters back to ready with their attempts reset; how many. */
  redrive(now: number, maxAttempts: number): number {
    return this.statements.redrive.run({ now, max: maxAttempts }).changes;
  }

  counts(now: number, maxAttempts: number): QueueCounts {
    return this.statements.counts.get({ now, max: maxAttempts }) as QueueCounts;
  }

  /** When the next hidden message becomes visible; null when none is hidden. */
  nextVisibleAt(now: number): number | null {
    return this.statements.nextVisible.get({ now }) as number | null;
  }

  usage(): { messages: number; bytes: number } {
    return this.statements.usage.get() as { messages: number; bytes: number };
  }

  /** The message id a DEDUP id was first given to, while its window lasts. */
  dedupFind(dedupId: string, now: number): string | undefined {
    return this.statements.dedupFind.get({ dedup_id: dedupId, now }) as string | undefined;
  }

  dedupPut(dedupId: string, messageId: string, expiresAt: number): void {
    this.statements.dedupPut.run({ dedup_id: dedupId, message_id: messageId, expires_at: expiresAt });
  }

  /** Deletes every message (DEDUP windows stay: they are about senders); how many. */
  purge(): number {
    const { messages } = this.usage();
    // Dropping the table costs far less than deleting row by row through the triggers.
    this.db.exec('DROP TABLE messages');
    this.db.exec(QUEUE_SCHEMA);
    this.db.exec('UPDATE queue_usage SET messages = 0, bytes = 0');
    return messages;
  }

  /** Deletes up to `limit` messages enqueued at or before `before` (past retention); how many. */
  deleteOld(before: number, limit: number): number {
    return this.statements.deleteOld.run({ before, limit }).changes;
  }

  /** Deletes up to `limit` DEDUP windows that have ended; how many. */
  deleteOldDedup(now: number, limit: number): number {
    return this.statements.deleteOldDedup.run({ now, limit }).changes;
  }
}
