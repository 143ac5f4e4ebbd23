/**
 * In-process wake-ups per store: a long-polling DEQUEUE waits here instead of reading the
 * file in a loop, and a write that may have made a message ready wakes every waiter of its
 * store (each then tries to take a message; those that find none wait again).
 */
export class Wakeups {
  private readonly waiting = new Map<string, Set<() => void>>();

  /** Resolves after `ms`, or sooner when the store is woken. */
  wait(storeId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let waiters = this.waiting.get(storeId);
      if (!waiters) {
        waiters = new Set();
        this.waiting.set(storeId, waiters);
      }
      const set = waiters;
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiting.get(storeId) === set) this.waiting.delete(storeId);
        resolve();
      };
      const timer = setTimeout(done, Math.max(ms, 1));
      set.add(done);
    });
  }

  /** Wakes every waiter of the store. */
  wake(storeId: string): void {
    for (const done of [...(this.waiting.get(storeId) ?? [])]) done();
  }
}
