import { browserRouteActions, browserRoutes } from '../../http/routes/browser-routes.js';
import { browserTools } from '../../mcp/tools/browser-tools.js';
import type { DomainModule } from '../domain-module.js';
import { BrowserService } from './browser-service.js';

declare module '../context.js' {
  interface ServiceParts {
    browser: BrowserService;
  }
}

/** Browser automation in browser sandboxes. */
export const browserModule = {
  name: 'browser',
  wire: (ctx) => ({ browser: new BrowserService(ctx) }),
  routes: [browserRoutes],
  routeActions: browserRouteActions,
  tools: browserTools,
  close: ({ browser }) => browser.close(),
} satisfies DomainModule;
