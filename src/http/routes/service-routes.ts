import { envelope } from '../../schemas/common.js';
import { health, serverStats, serverStatus } from '../../schemas/service-schemas.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';

/** /health, /status, /stats and /openapi.json. */
export async function serviceRoutes(app: App, { services }: RouteContext): Promise<void> {
  app.get(
    '/health',
    { schema: { tags: ['service'], summary: 'Liveness check (no auth)', response: { 200: health } } },
    async () => ({ status: 'ok', success: true, data: 'ok' }),
  );

  app.get(
    '/status',
    { schema: { tags: ['service'], summary: 'Version, backend and whether auth is on (no auth)', response: { 200: envelope(serverStatus) } } },
    async () => ok(services.status()),
  );

  app.get(
    '/stats',
    { schema: { tags: ['service'], summary: 'Sandbox counts and host resource usage', response: { 200: envelope(serverStats), ...errors() } } },
    async () => ok(await services.stats()),
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
