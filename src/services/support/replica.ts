import { hostname } from 'node:os';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import type { Logger } from '../../telemetry/logger.js';
import type { ReplicaTable } from '../../state/schema.js';
import type { Store } from '../../state/store.js';

/** How often a replica writes its heartbeat and, when it does not lead, asks for the leader's lock. */
export const HEARTBEAT_MS = 5_000;
/** A replica whose heartbeat is older than this is gone (four heartbeats missed). */
export const STALE_MS = 20_000;
/**
 * The advisory lock the leader holds on a connection of its own (a session lock): when the
 * leader's process dies, PostgreSQL ends its session and the lock is free for another replica.
 * The number is sandboxd's own (the first eight bytes of "sandboxd" read as an integer).
 */
const LEADER_LOCK = 0x73616e64626f7864n;

/** The replicas of the database whose heartbeat is fresh at `now`. */
const liveReplicas = (db: Store['db'], now: number) => db.selectFrom('replicas').where('heartbeat_at', '>=', now - STALE_MS);

/** The ids of the replicas of the database whose heartbeat is fresh at `now`. */
export async function liveReplicaIds(db: Store['db'], now: number): Promise<Set<string>> {
  const rows = await liveReplicas(db, now).select('id').execute();
  return new Set(rows.map((row) => row.id));
}

export interface ReplicaOptions {
  /** The replica's id (default: a new UUIDv7); the server makes it before its services, which label pool instances with it. */
  id?: string;
  /** The time in epoch milliseconds (tests). */
  now?: () => number;
  /**
   * The leader's session ended, and its lock with it: another replica may take the lead while
   * work this one led is under way. The server exits (a supervisor starts it again as a follower).
   */
  onLostLead?: () => void;
}

/**
 * This server as one of the replicas that share the database: its row and heartbeat, and whether
 * it leads. The leader runs the work that must run once (the loops, the timers, recovery). On
 * SQLite the data directory has one server, which always leads; on PostgreSQL the replica holding
 * the leader's advisory lock does, and the others ask for it at every heartbeat, so one of them
 * takes over within a heartbeat of the leader's end.
 */
export class Replica {
  readonly id: string;
  private leader = false;
  private session?: pg.Client;
  private timer?: NodeJS.Timeout;
  private beating: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly leadListeners: (() => void)[] = [];

  private constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly options: ReplicaOptions,
  ) {
    this.id = options.id ?? uuidv7();
  }

  /** Writes this replica's row, takes the lead if it can, and starts the heartbeat. */
  static async start(store: Store, logger: Logger, options: ReplicaOptions = {}): Promise<Replica> {
    const replica = new Replica(store, logger, options);
    const now = replica.now;
    const at = now();
    // The data directory's lock is this process's: a replica that ran on it before is dead, whatever its heartbeat says.
    await store.db.deleteFrom('replicas').where('host', '=', hostname()).where('data_dir', '=', store.dataDir).execute();
    await store.db.insertInto('replicas').values({ id: replica.id, host: hostname(), data_dir: store.dataDir, pid: process.pid, url: null, started_at: at, heartbeat_at: at }).execute();
    await replica.beat();
    replica.schedule();
    return replica;
  }

  private readonly now = (): number => (this.options.now ?? Date.now)();

  /** Whether this replica runs the work that must run once. */
  get leading(): boolean {
    return this.leader;
  }

  /** Calls `listener` each time this replica takes the lead (at once when it leads now). */
  onLead(listener: () => void): void {
    this.leadListeners.push(listener);
    if (this.leader) listener();
  }

  /** Records the URL this replica serves on, for the list of replicas. */
  async serving(url: string): Promise<void> {
    await this.store.db.updateTable('replicas').set({ url }).where('id', '=', this.id).execute();
  }

  /** The replicas whose heartbeat is fresh, this one included, oldest first. */
  async live(): Promise<ReplicaTable[]> {
    return liveReplicas(this.store.db, this.now()).selectAll().orderBy('started_at').execute();
  }

  /** Stops the heartbeat, lets the lead go and removes this replica's row. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.beating;
    this.leader = false;
    await this.session?.end().catch(() => undefined);
    await this.store.db.deleteFrom('replicas').where('id', '=', this.id).execute();
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.beating = this.beat()
        .catch((err: unknown) => this.logger.warn({ err }, 'replica heartbeat failed'))
        .finally(() => {
          if (!this.closed) this.schedule();
        });
    }, HEARTBEAT_MS);
    this.timer.unref();
  }

  /** One heartbeat: the row's time, the rows of replicas long gone removed, and the lead asked for. */
  private async beat(): Promise<void> {
    const at = this.now();
    await this.store.db.updateTable('replicas').set({ heartbeat_at: at }).where('id', '=', this.id).execute();
    // A replica killed without its close: its row goes an hour on (the list shows the stale ones meanwhile).
    await this.store.db.deleteFrom('replicas').where('heartbeat_at', '<', at - 3_600_000).execute();
    if (!this.leader && (await this.takeLead())) {
      this.leader = true;
      this.logger.info({ replica: this.id }, 'this replica leads');
      for (const listener of this.leadListeners) listener();
    }
  }

  /** Whether this replica now holds the leader's lock (always on SQLite: one server per database). */
  private async takeLead(): Promise<boolean> {
    const url = this.store.databaseUrl;
    if (!url) return true;
    if (!this.session) {
      const session = new pg.Client({ connectionString: url });
      // The session ends (the database restarted, the connection broke): the lock is gone with it.
      session.on('error', (err) => this.lostSession(session, err));
      session.on('end', () => this.lostSession(session));
      await session.connect();
      this.session = session;
    }
    const { rows } = await this.session.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [LEADER_LOCK.toString()]);
    return rows[0]?.locked === true;
  }

  /** The leader's lock went with its session: it leads no longer, and says so. */
  private lostSession(session: pg.Client, err?: Error): void {
    if (this.session !== session || this.closed) return;
    this.session = undefined;
    if (!this.leader) return;
    this.leader = false;
    this.logger.error({ err, replica: this.id }, 'the leader lost its database session, and the lead with it');
    this.options.onLostLead?.();
  }
}
