import type { EventResource, EventType, SandboxEvent } from '../../schemas/event-schemas.js';
import type { Logger } from '../../telemetry/logger.js';

export type { EventResource, EventType, SandboxEvent };

/**
 * What a publisher gives: the bus numbers the event and sets `event` from `type`. An event not
 * about a sandbox has `sandbox` and `sandbox_uuid` empty and says what it is about in `resource`.
 */
export type NewEvent = Omit<SandboxEvent, 'id' | 'event'>;

/** An event with its JSON text, serialised once for every stream and webhook. */
export interface PublishedEvent {
  event: SandboxEvent;
  json: string;
}

export type EventListener = (published: PublishedEvent) => void;

export interface EventBusOptions {
  /** Whether the outside world sees events (GET /events, webhooks); metrics always do. */
  enabled: boolean;
  /** Events kept for Last-Event-ID resume. */
  backlog: number;
  logger: Logger;
}

/** What a resuming client gets: the events after its id, and whether some were lost. */
export interface Replay {
  events: PublishedEvent[];
  /** True when events after the client's id left the bounded backlog (or predate this process). */
  gap: boolean;
}

/**
 * The in-process event bus. Publishing is synchronous and cheap (one JSON.stringify, one
 * call per listener), so it never slows a request; listeners that do slow work (webhooks,
 * SSE clients) queue it themselves. Ids start at the start time in microseconds, so that
 * they keep growing across restarts and an old Last-Event-ID never skips new events.
 */
export class EventBus {
  readonly enabled: boolean;
  private readonly listeners = new Set<EventListener>();
  private streamClients = 0;
  private readonly ring: PublishedEvent[] = [];
  private readonly capacity: number;
  private nextId = Date.now() * 1000;

  constructor(private readonly options: EventBusOptions) {
    this.enabled = options.enabled;
    this.capacity = options.backlog;
  }

  /** Id of the latest event, or one below the first id when none was published. */
  get lastId(): number {
    return this.nextId - 1;
  }

  /** Numbers the event, sets its `event` field, keeps it in the backlog and hands it to every listener. */
  publish({ type, ...rest }: NewEvent): SandboxEvent {
    // Keys in the order id, type, event: the JSON opens with `{"id":…,"type":…`, which clients may match on.
    const full: SandboxEvent = { id: this.nextId++, type, event: type, ...rest };
    const published = { event: full, json: JSON.stringify(full) };
    if (this.enabled) {
      this.ring.push(published);
      // Trimmed in batches, so that keeping the backlog costs O(1) per event.
      if (this.ring.length >= 2 * this.capacity) this.ring.splice(0, this.ring.length - this.capacity);
    }
    for (const listener of this.listeners) {
      try {
        listener(published);
      } catch (err) {
        this.options.logger.error({ err, event: full.type }, 'event listener failed');
      }
    }
    return full;
  }

  /** Connected stream clients (GET /events), for the metrics. */
  get clients(): number {
    return this.streamClients;
  }

  /**
   * Adds a listener; returns the function that removes it. `client` marks a stream client
   * (GET /events), counted in `clients`.
   */
  subscribe(listener: EventListener, { client = false } = {}): () => void {
    this.listeners.add(listener);
    if (client) this.streamClients++;
    return () => {
      if (this.listeners.delete(listener) && client) this.streamClients--;
    };
  }

  /**
   * Follows the events that match `filter`: first those after `after` that the backlog still
   * holds (`onGap` is called before them when some are gone), then every new one. Replay and
   * subscription happen in one synchronous step, so no event falls between them. A `sandbox`
   * filter leaves out the events not about a sandbox (those with a `resource`).
   */
  follow(
    filter: { sandbox?: string; types?: ReadonlySet<EventType> },
    after: number | undefined,
    deliver: EventListener,
    onGap?: () => void,
  ): () => void {
    const send = (published: PublishedEvent) => {
      const { event } = published;
      const sandboxMatches = !filter.sandbox || (!event.resource && event.sandbox === filter.sandbox);
      if (sandboxMatches && (!filter.types || filter.types.has(event.type))) deliver(published);
    };
    const replay = after === undefined ? undefined : this.since(after);
    const unsubscribe = this.subscribe(send, { client: true });
    if (replay?.gap) onGap?.();
    for (const published of replay?.events ?? []) send(published);
    return unsubscribe;
  }

  /** The backlog after `lastId` (ids are consecutive, so this is one slice). */
  since(lastId: number): Replay {
    const kept = this.ring.length > this.capacity ? this.ring.slice(-this.capacity) : this.ring;
    const oldest = kept[0]?.event.id ?? this.nextId;
    const from = Math.max(0, lastId + 1 - oldest);
    return { events: kept.slice(from), gap: lastId + 1 < oldest };
  }
}
