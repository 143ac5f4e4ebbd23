import { fileRoutes } from '../../http/routes/file-routes.js';
import { fsRoutes } from '../../http/routes/fs-routes.js';
import { imageRoutes } from '../../http/routes/image-routes.js';
import { lifecycleRoutes } from '../../http/routes/lifecycle-routes.js';
import { sandboxRoutes } from '../../http/routes/sandbox-routes.js';
import { snapshotRoutes } from '../../http/routes/snapshot-routes.js';
import { volumeRoutes } from '../../http/routes/volume-routes.js';
import { fileTools } from '../../mcp/tools/file-tools.js';
import { lifecycleTools } from '../../mcp/tools/lifecycle-tools.js';
import { sandboxTools } from '../../mcp/tools/sandbox-tools.js';
import { snapshotTools } from '../../mcp/tools/snapshot-tools.js';
import type { DomainModule } from '../domain-module.js';
import { FileService } from './file-service.js';
import { FsViewService } from './fs-view-service.js';
import { ImageService } from './image-service.js';
import { LifecycleService } from './lifecycle-service.js';
import { RecoveryService } from './recovery-service.js';
import { hostLimits, SandboxService } from './sandbox-service.js';
import { SnapshotService } from './snapshot-service.js';
import { VolumeService } from './volume-service.js';

declare module '../context.js' {
  interface ServiceParts {
    sandboxes: SandboxService;
    files: FileService;
    /** Listings, stat and watches of a sandbox's files. */
    fsViews: FsViewService;
    /** Named volumes. */
    volumes: VolumeService;
    snapshots: SnapshotService;
    images: ImageService;
    lifecycle: LifecycleService;
    recovery: RecoveryService;
  }
}

/** Sandboxes: their records and lifecycle, files, volumes, snapshots, images and recovery. */
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
      volumes: new VolumeService(ctx),
      snapshots: new SnapshotService({ ...part('snapshots'), sandboxes }),
      images: new ImageService(ctx),
      lifecycle: new LifecycleService({ ...part('lifecycle'), sandboxes }),
      recovery: new RecoveryService(part('recovery')),
    };
  },
  routes: [sandboxRoutes, fileRoutes, fsRoutes, volumeRoutes, lifecycleRoutes, snapshotRoutes, imageRoutes],
  tools: [...sandboxTools, ...fileTools, ...lifecycleTools, ...snapshotTools],
} satisfies DomainModule;
