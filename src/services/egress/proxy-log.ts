import type { ProxyLogEntry } from '../../schemas/proxy-schemas.js';

/** Decisions kept by the proxy log; older ones are dropped as new ones arrive. */
export const PROXY_LOG_SIZE = 10_000;

/**
 * The recent decisions of the egress proxy (`GET /proxy/log`): a ring in memory, so the request
 * path pays no write; it starts empty after a restart (the hooks' audit events are the durable
 * record).
 */
export class ProxyLog {
  private readonly entries: ProxyLogEntry[] = [];
  private next = 0;

  constructor(private readonly size = PROXY_LOG_SIZE) {}

  add(entry: ProxyLogEntry): void {
    if (this.entries.length < this.size) this.entries.push(entry);
    else this.entries[this.next] = entry;
    this.next = (this.next + 1) % this.size;
  }

  /** The newest entries first, of one sandbox (by name) when given. */
  recent(limit: number, sandbox?: string): ProxyLogEntry[] {
    const out: ProxyLogEntry[] = [];
    const count = this.entries.length;
    for (let i = 1; i <= count && out.length < limit; i++) {
      const entry = this.entries[(this.next - i + count * 2) % count];
      if (entry && (sandbox === undefined || entry.sandbox === sandbox)) out.push(entry);
    }
    return out;
  }
}
