import { terminalRouteActions, terminalRoutes } from '../../http/routes/terminal-routes.js';
import type { DomainModule } from '../domain-module.js';
import { TerminalService } from './terminal-service.js';

declare module '../context.js' {
  interface ServiceParts {
    /** Interactive terminals (PTYs) in sandboxes. */
    terminals: TerminalService;
  }
}

/** Terminals: interactive shells in sandboxes over a WebSocket. */
export const terminalsModule = {
  name: 'terminals',
  wire: (ctx) => ({ terminals: new TerminalService(ctx) }),
  routes: [terminalRoutes],
  routeActions: terminalRouteActions,
  close: ({ terminals }) => terminals.close(),
} satisfies DomainModule;
