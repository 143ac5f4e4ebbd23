import { fileRouteActions, fileRoutes } from '../../http/routes/file-routes.js';
import { fsRouteActions, fsRoutes } from '../../http/routes/fs-routes.js';
import { lifecycleRouteActions, lifecycleRoutes } from '../../http/routes/lifecycle-routes.js';
import { sandboxRouteActions, sandboxRoutes } from '../../http/routes/sandbox-routes.js';
import { snapshotRouteActions, snapshotRoutes } from '../../http/routes/snapshot-routes.js';
import { fileTools } from '../../mcp/tools/file-tools.js';
import { lifecycleTools } from '../../mcp/tools/lifecycle-tools.js';
import { sandboxTools } from '../../mcp/tools/sandbox-tools.js';
import { snapshotTools } from '../../mcp/tools/snapshot-tools.js';
import type { DomainModule } from '../domain-module.js';
import { FileService } from './file-service.js';
import { FsViewService } from './fs-view-service.js';
import { LifecycleService } from './lifecycle-service.js';
import { RecoveryService } from './recovery-service.js';
import { hostLimits } from './host-limits.js';
import { SandboxService } from './sandbox-service.js';
import { SnapshotService } from './snapshot-service.js';

declare module '../context.js' {
  interface ServiceParts {
    sandboxes: SandboxService;
    files: FileService;
    /** Listings, stat and watches of a sandbox's files. */
    fsViews: FsViewService;
    snapshots: SnapshotService;
    lifecycle: LifecycleService;
    recovery: RecoveryService;
  }
}

/** Sandboxes: their records and lifecycle, files, snapshots and recovery. */
export const sandboxesModule = {
  name: 'sandboxes',
  wire(ctx) {
    const part = (name: string) => ({ ...ctx, logger: ctx.logger.child({ part: name }) });
    const sandboxes = new SandboxService({ ...part('sandboxes'), host: ctx.inputs.hostLimits ?? hostLimits() });
    const withSandboxes = { ...ctx, sandboxes };
    return {
      sandboxes,
      files: new FileService(withSandboxes),
      fsViews: new FsViewService(withSandboxes),
      snapshots: new SnapshotService({ ...part('snapshots'), sandboxes }),
      lifecycle: new LifecycleService({ ...part('lifecycle'), sandboxes }),
      recovery: new RecoveryService(part('recovery')),
    };
  },
  routes: [sandboxRoutes, fileRoutes, fsRoutes, lifecycleRoutes, snapshotRoutes],
  routeActions: { ...sandboxRouteActions, ...fileRouteActions, ...fsRouteActions, ...lifecycleRouteActions, ...snapshotRouteActions },
  tools: [...sandboxTools, ...fileTools, ...lifecycleTools, ...snapshotTools],
  eventKinds: ['sandbox.created', 'sandbox.started', 'sandbox.stopped', 'sandbox.resized', 'sandbox.extended', 'sandbox.archived', 'sandbox.recovered', 'sandbox.expired', 'sandbox.deleted', 'snapshot.created', 'snapshot.restored', 'snapshot.deleted'],
  metrics: ['sandboxd_sandbox_create_duration_seconds', 'sandboxd_sandboxes_active'],
} satisfies DomainModule;
