import { envelope } from '../../schemas/common.js';
import { health, serverStats, serverStatus } from '../../schemas/service-schemas.js';
import { errors, ok, textReply, type App, type RouteContext } from '../route-types.js';

/** /health, /status, /stats, /metrics and /openapi.json. */
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

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['service'],
        summary: 'Prometheus metrics (text exposition format); needs a key when auth is on',
        response: { 200: textReply('text/plain; version=0.0.4', 'Metrics in the Prometheus text exposition format 0.0.4'), ...errors() },
      },
    },
    async (_request, reply) => {
      const { text, contentType } = await services.observability.metrics.scrape();
      return reply.type(contentType).send(text);
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
