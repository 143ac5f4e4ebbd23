import type Docker from 'dockerode';

/**
 * How far before a listing began the engine's events are asked for: the engine stamps an event
 * with its own clock, which is this host's, but not to the millisecond of ours.
 */
const MARGIN_MS = 1_000;
/**
 * The longest a listing is answered again, events or not: an engine that restarted has a new,
 * empty log of events, and the containers it stopped on its way down would otherwise stay
 * `running` in what is kept.
 */
const MAX_AGE_MS = 5_000;

/** A time as the engine's API reads it: seconds, with the milliseconds as a fraction (`1764385000.123`). */
const engineTime = (ms: number) => ms / 1000;

/**
 * The engine's containers of this deployment, listed once and answered again while nothing has
 * happened in the engine since: `GET /sandboxes` of 500 idle sandboxes listed 500 containers each
 * time. Before it answers from what it keeps, it asks the engine for its events since that
 * listing began (`GET /events?since=&until=now`: one small request that ends at once), and lists
 * again after any event. It asks for every event of every kind, ours or not: the engine keeps
 * only its most recent events (256), so an event of ours that others pushed out still shows as
 * newer ones. The engine records a container's event before it answers the call that made it
 * (a kill, a stop, a removal), so a change that this server or anyone else made is never missed.
 * A listing is answered again for MAX_AGE_MS at most.
 */
export class ContainerListing {
  private kept?: { rows: Docker.ContainerInfo[]; startedAt: number };

  constructor(
    private readonly docker: Docker,
    private readonly listing: () => Promise<Docker.ContainerInfo[]>,
    private readonly now: () => number = Date.now,
  ) {}

  async list(): Promise<Docker.ContainerInfo[]> {
    const kept = this.kept;
    if (kept && this.now() - kept.startedAt < MAX_AGE_MS && !(await this.eventsSince(kept.startedAt - MARGIN_MS))) return kept.rows;
    const startedAt = this.now();
    const rows = await this.listing();
    this.kept = { rows, startedAt };
    return rows;
  }

  /** Whether the engine has recorded any event between `since` and now. */
  private async eventsSince(since: number): Promise<boolean> {
    const stream = (await this.docker.getEvents({ since: engineTime(since), until: engineTime(this.now()) })) as NodeJS.ReadableStream & { destroy(): void };
    return new Promise<boolean>((resolve, reject) => {
      stream.once('data', () => {
        resolve(true);
        stream.destroy();
      });
      stream.once('end', () => resolve(false));
      stream.once('error', reject);
    });
  }
}
