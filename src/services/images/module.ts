import { imageRouteActions, imageRoutes } from '../../http/routes/image-routes.js';
import { migration as imageBuilds } from '../../state/migrations/0020-image-builds.js';
import type { DomainModule } from '../domain-module.js';
import { ImageService } from './image-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Images built from a Dockerfile. */
    images: ImageService;
  }
}

/** Images: built from a Dockerfile through the engine, listed and deleted. */
export const imagesModule = {
  name: 'images',
  wire: (ctx) => ({ images: new ImageService(ctx) }),
  routes: [imageRoutes],
  // Builds are recorded (before they start) in a table of the domain's own.
  migrations: { '0020_image_builds': imageBuilds },
  routeActions: imageRouteActions,
} satisfies DomainModule;
