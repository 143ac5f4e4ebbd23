import type { ProxyLogEntry } from '../../schemas/proxy-schemas.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import { WritesInFlight } from '../support/writes-in-flight.js';

/** Decisions kept by the proxy log; older ones are dropped as new ones arrive. */
export const PROXY_LOG_SIZE = 10_000;
/** Every this many decisions, those past the size are dropped: the table holds at most PROXY_LOG_SIZE + PRUNE_EVERY. */
const PRUNE_EVERY = 256;

/**
 * The recent decisions of the egress proxy (`GET /proxy/log`), kept in the state store so that
 * they survive a restart: one prepared insert per request, after its answer, and a bounded table.
 */
export class ProxyLog {
  constructor(
    private readonly repo: Pick<ProxyRepository, 'addDecision' | 'pruneDecisions' | 'decisions'>,
    private readonly size = PROXY_LOG_SIZE,
  ) {}

  /** Decisions being written: a request is answered before its decision is kept. */
  private readonly writing = new WritesInFlight();

  add(entry: ProxyLogEntry): Promise<void> {
    return this.writing.track(this.write(entry));
  }

  /** The newest entries first, of one sandbox (by name) when given; this server's decisions in flight are awaited first. */
  async recent(limit: number, sandbox?: string): Promise<ProxyLogEntry[]> {
    await this.writing.settled();
    return (await this.repo.decisions(Math.min(limit, this.size), sandbox)).map((entry) => JSON.parse(entry) as ProxyLogEntry);
  }

  private async write(entry: ProxyLogEntry): Promise<void> {
    const id = await this.repo.addDecision(entry.sandbox, JSON.stringify(entry));
    if (id % PRUNE_EVERY === 0) await this.repo.pruneDecisions(id - this.size);
  }
}
