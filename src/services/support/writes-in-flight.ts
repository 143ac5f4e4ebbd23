/**
 * Writes a service makes after its answer, off the request path: a read of what they write waits
 * for them first, so that this server reads its own writes (on PostgreSQL a read on another
 * connection may otherwise overtake them; on SQLite they are done by then).
 */
export class WritesInFlight {
  private readonly pending = new Set<Promise<unknown>>();

  /** Tracks `write` until it settles; answers it as it is. */
  track<T>(write: Promise<T>): Promise<T> {
    const tracked: Promise<T> = write.finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
    return tracked;
  }

  /** Resolves once every write tracked so far has settled (a failed one included). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}
