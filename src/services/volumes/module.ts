import { volumeRouteActions, volumeRoutes } from '../../http/routes/volume-routes.js';
import type { DomainModule } from '../domain-module.js';
import { VolumeService } from './volume-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Named volumes. */
    volumes: VolumeService;
  }
}

/** Volumes: named volumes that sandboxes mount, kept apart from any one sandbox. */
export const volumesModule = {
  name: 'volumes',
  wire: (ctx) => ({ volumes: new VolumeService(ctx) }),
  routes: [volumeRoutes],
  routeActions: volumeRouteActions,
} satisfies DomainModule;
