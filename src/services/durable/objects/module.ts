import { objectRouteActions, objectRoutes } from '../../../http/routes/object-routes.js';
import { objectTools } from '../../../mcp/tools/object-tools.js';
import type { DomainModule } from '../../domain-module.js';
import { migration as idempotencyRequest } from '../../../state/migrations/0021-object-idempotency-request.js';
import { migration as objectUid } from '../../../state/migrations/0025-object-uid.js';
import { ObjectClasses } from './object-classes.js';
import { ObjectService } from './object-service.js';
import { ObjectAlarms, ObjectHibernation } from './object-timers.js';

declare module '../../context.js' {
  interface ServiceParts {
    /** Durable-object classes. */
    objectClasses: ObjectClasses;
    /** Durable objects and their calls. */
    objects: ObjectService;
  }
}

/** Durable objects: classes, instances, calls, storage, alarms and hibernation. */
export const objectsModule = {
  name: 'objects',
  wire(ctx) {
    const { config, repos } = ctx;
    const objectClasses = new ObjectClasses({ ...ctx, repo: repos.objects, maxStorageBytes: config.objectMaxStorage });
    const objects = new ObjectService({
      ...ctx,
      logger: ctx.logger.child({ part: 'objects' }),
      repo: repos.objects,
      classes: objectClasses,
      concurrency: config.objectConcurrency,
    });
    return { objectClasses, objects };
  },
  migrations: { '0021_object_idempotency_request': idempotencyRequest, '0025_object_uid': objectUid },
  routes: [objectRoutes],
  routeActions: objectRouteActions,
  tools: objectTools,
  timers: ({ repos, objects, timers, logger, clock }) => [
    new ObjectAlarms(repos.objects, objects, () => void timers.poke(), logger.child({ part: 'object-alarms' }), clock),
    new ObjectHibernation(repos.objects, objects),
  ],
  close: ({ objects }) => objects.close(),
  eventKinds: ['object.created', 'object.woken', 'object.hibernated', 'object.deleted', 'object.alarm.failed'],
  metrics: ['sandboxd_object_calls_total', 'sandboxd_object_call_duration_seconds', 'sandboxd_objects_active'],
} satisfies DomainModule;
