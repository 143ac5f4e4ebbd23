import type { Migration } from 'kysely';
import type { RouteAction } from '../http/route-actions.js';
import type { Tool } from '../mcp/tool.js';
import { MIGRATIONS } from '../state/migrations/index.js';
import { browserModule } from './browser/module.js';
import { commandsModule } from './commands/module.js';
import type { DomainModule, RoutePlugin } from './domain-module.js';
import { objectsModule } from './durable/objects/module.js';
import { orchestrationsModule } from './durable/orchestrations/module.js';
import { schedulesModule } from './durable/schedules/module.js';
import { storesModule } from './durable/stores/module.js';
import { egressModule } from './egress/module.js';
import { eventsModule } from './events/module.js';
import { governanceModule } from './governance/module.js';
import { imagesModule } from './images/module.js';
import { poolsModule } from './pools/module.js';
import { previewModule } from './preview/module.js';
import { sandboxesModule } from './sandboxes/module.js';
import { terminalsModule } from './terminals/module.js';
import { volumesModule } from './volumes/module.js';

/**
 * Every domain of the service layer, in wiring order: a domain may use the parts of the
 * domains before it. The hubs loop over this list; a new domain is one more entry here.
 */
export const DOMAINS: readonly DomainModule[] = [
  eventsModule,
  poolsModule,
  volumesModule,
  sandboxesModule,
  imagesModule,
  egressModule,
  commandsModule,
  terminalsModule,
  browserModule,
  previewModule,
  objectsModule,
  orchestrationsModule,
  schedulesModule,
  storesModule,
  governanceModule,
];

/** The HTTP routes of every domain, in order. */
export const domainRoutes = (): RoutePlugin[] => DOMAINS.flatMap((domain) => domain.routes ?? []);

/** The MCP tools of every domain, in order. */
export const domainTools = (): Tool[] => DOMAINS.flatMap((domain) => domain.tools ?? []);

/** The MCP tools of each domain that has some, by the domain's name: the per-domain tool sets of `sandboxd mcp --tools`. */
export const domainToolSets = (): Record<string, Tool[]> =>
  Object.fromEntries(DOMAINS.flatMap((domain) => (domain.tools?.length ? [[domain.name, [...domain.tools]]] : [])));

/** The route table of policy: every domain's entries. */
export const domainRouteActions = (): Record<string, RouteAction | 'open'> =>
  Object.assign({}, ...DOMAINS.map((domain) => domain.routeActions ?? {}));

/** The core migrations and every domain's own, by name (the runner applies them in name order). */
export function allMigrations(): Record<string, Migration> {
  const all: Record<string, Migration> = { ...MIGRATIONS };
  for (const domain of DOMAINS) {
    for (const [name, migration] of Object.entries(domain.migrations ?? {})) {
      if (name in all) throw new Error(`migration ${name} of ${domain.name} is named like another: number it after the last one`);
      all[name] = migration;
    }
  }
  return all;
}
