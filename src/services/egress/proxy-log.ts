import type { ProxyLogEntry } from '../../schemas/proxy-schemas.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';

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

  async add(entry: ProxyLogEntry): Promise<void> {
    const id = await this.repo.addDecision(entry.sandbox, JSON.stringify(entry));
    if (id % PRUNE_EVERY === 0) await this.repo.pruneDecisions(id - this.size);
  }

  /** The newest entries first, of one sandbox (by name) when given. */
  async recent(limit: number, sandbox?: string): Promise<ProxyLogEntry[]> {
    return (await this.repo.decisions(Math.min(limit, this.size), sandbox)).map((entry) => JSON.parse(entry) as ProxyLogEntry);
  }
}
