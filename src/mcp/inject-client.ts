import type { FastifyInstance } from 'fastify';
import { unwrap, urlOf, type ApiClient } from './api-client.js';

/**
 * The in-process client: requests go through the Fastify app with `inject()`, without a
 * socket, so the tools meet exactly the routes, validation and auth that HTTP clients meet.
 */
export function injectClient(app: Pick<FastifyInstance, 'inject'>, target: string, apiKey?: string): ApiClient {
  return {
    target,
    async request(request, signal) {
      const response = await app.inject({
        method: request.method,
        url: urlOf(request),
        headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
        ...(request.body !== undefined ? { payload: request.body as object } : {}),
        ...(signal ? { signal } : {}),
      });
      return unwrap(response.statusCode, response.body);
    },
  };
}
