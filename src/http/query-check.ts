import type { FastifyInstance } from 'fastify';
import { badRequest } from '../errors.js';

/**
 * Refuses query parameters on routes that declare none, as the routes that declare theirs
 * refuse unknown ones (strict schemas): a misspelt or unsupported filter is a 400 that names
 * it, never a filter silently ignored.
 */
export function registerQueryCheck(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    if (request.is404 || request.routeOptions.schema?.querystring) return;
    const names = Object.keys((request.query ?? {}) as Record<string, unknown>);
    if (names.length > 0) throw badRequest(names.map((name) => `unknown field '${name}' in querystring`).join('; '));
  });
}
