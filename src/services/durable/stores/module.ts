import { join } from 'node:path';
import { storeRouteActions, storeRoutes } from '../../../http/routes/store-routes.js';
import { storeTools } from '../../../mcp/tools/store-tools.js';
import type { DomainModule } from '../../domain-module.js';
import { storeEngines } from './engine-registry.js';
import type { StoreResolver } from './store-destination.js';
import type { StoreEngine } from './store-engine.js';
import { StoreService } from './store-service.js';

declare module '../../context.js' {
  interface ServiceInputs {
    /** One engine per store kind offered; default every kind's real engine. */
    engines?: StoreEngine[];
    /** How external stores' host names resolve; default the system's resolver (tests give names of their own). */
    storeResolver?: StoreResolver;
  }
  interface ServiceParts {
    /** Durable stores; its `handles` close idle connections. */
    stores: StoreService;
  }
}

/** Durable stores: embedded and host SQLite, kv, queues, and external PostgreSQL, MySQL and Redis. */
export const storesModule = {
  name: 'stores',
  wire(ctx) {
    const logger = ctx.logger.child({ part: 'stores' });
    return {
      stores: new StoreService({
        ...ctx,
        logger,
        engines: ctx.inputs.engines ?? storeEngines({ workers: ctx.config.storeWorkers, exec: ctx.exec, clock: ctx.clock, logger }),
        storesDir: join(ctx.store.dataDir, 'stores'),
        poke: () => void ctx.timers.poke(),
        ...(ctx.inputs.storeResolver ? { destinations: { resolve: ctx.inputs.storeResolver } } : {}),
      }),
    };
  },
  routes: [storeRoutes],
  routeActions: storeRouteActions,
  tools: storeTools,
  timers: ({ stores }) => [stores.handles],
  close: ({ stores }) => stores.close(),
  eventKinds: ['store.created', 'store.deleted'],
  metrics: ['sandboxd_store_ops_total', 'sandboxd_store_op_duration_seconds'],
} satisfies DomainModule;
