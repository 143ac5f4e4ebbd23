import type { Migration } from 'kysely';
import type { RouteAction } from '../http/route-actions.js';
import type { App, RouteContext } from '../http/route-types.js';
import type { Tool } from '../mcp/tool.js';
import type { EventType } from '../schemas/event-schemas.js';
import type { ServiceContext, ServiceParts, WiringContext } from './context.js';
import type { TimerSource } from './durable/durable-timers.js';

/** A Fastify plugin of the HTTP face, registered with the app's route context. */
export type RoutePlugin = (app: App, context: RouteContext) => Promise<void>;

/**
 * What one domain adds to the server, as one value: the hubs (the wiring in services.ts, the
 * HTTP app, the MCP tool list, the migration runner, the policy route table, the timers
 * driver) loop over `DOMAINS` (domains.ts) instead of naming each domain. A new domain is a
 * folder with its `module.ts` and one more entry in that list.
 *
 * A domain's services reach the faces through `ServiceParts`, which its module extends by
 * declaration merging (`declare module '../context.js'`), and other domains through the
 * interfaces of `ServiceContext`.
 */
export interface DomainModule<Parts extends Partial<ServiceParts> = Partial<ServiceParts>> {
  /** The domain's folder under services/, also its name in logs (`part`). */
  readonly name: string;
  /**
   * Builds the domain's services from the context: the shared base and every part that the
   * domains before it in `DOMAINS` built. Reading a part no earlier domain built throws.
   */
  wire?(ctx: WiringContext): Parts;
  /** HTTP routes, one Fastify plugin per resource. */
  readonly routes?: readonly RoutePlugin[];
  /** MCP tools, one family per file. */
  readonly tools?: readonly Tool[];
  /** Schema migrations this domain adds beyond the core ones, by `NNNN-what` name. */
  readonly migrations?: Readonly<Record<string, Migration>>;
  /** How policy sees each of the domain's routes (`METHOD /template` -> action). */
  readonly routeActions?: Readonly<Record<string, RouteAction | 'open'>>;
  /** Sources of work due at a time that the one timers driver runs. */
  timers?(ctx: ServiceContext): TimerSource[];
  /** The event kinds the domain publishes (test/unit/services/domain-modules.test.ts: each kind has one owner). */
  readonly eventKinds?: readonly EventType[];
  /** The Prometheus series the domain keeps (telemetry/metrics.ts; each series has one owner). */
  readonly metrics?: readonly string[];
  /** Stops the domain's background work at shutdown, in reverse order of `DOMAINS`. */
  close?(parts: ServiceParts): void | Promise<void>;
}
