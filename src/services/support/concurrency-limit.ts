/** Gives back a slot taken from a ConcurrencyLimit; calling it again does nothing. */
export type Release = () => void;

/**
 * At most `limit` holders at a time: `acquire` waits for a slot (first come, first served),
 * `tryAcquire` takes one only when it is free. Bounds work that holds memory or connections per
 * request, such as file reads.
 */
export class ConcurrencyLimit {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly limit: number) {}

  /** Slots taken now. */
  get inUse(): number {
    return this.active;
  }

  /** Waits for a slot; the caller must release it. */
  async acquire(): Promise<Release> {
    if (this.active < this.limit) return this.take();
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    // The releasing holder passed its slot on: `active` was not lowered for it.
    return this.releaser();
  }

  /** A slot if one is free now, else undefined. */
  tryAcquire(): Release | undefined {
    return this.active < this.limit ? this.take() : undefined;
  }

  private take(): Release {
    this.active++;
    return this.releaser();
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    };
  }
}
