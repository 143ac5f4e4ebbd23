import { previewRouteActions, previewRoutes } from '../../http/routes/preview-routes.js';
import { previewTools } from '../../mcp/tools/preview-tools.js';
import type { DomainModule } from '../domain-module.js';
import { PreviewService } from './preview-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Preview URLs: HTTP and WebSocket traffic to ports inside sandboxes. */
    preview: PreviewService;
  }
}

/** Preview URLs of ports inside sandboxes. */
export const previewModule = {
  name: 'preview',
  wire: (ctx) => ({ preview: new PreviewService(ctx) }),
  routes: [previewRoutes],
  routeActions: previewRouteActions,
  tools: previewTools,
  close: ({ preview }) => preview.close(),
} satisfies DomainModule;
