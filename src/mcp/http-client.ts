import { ServiceError } from '../errors.js';
import { unwrap, urlOf, type ApiClient } from './api-client.js';

/**
 * The remote client: requests go to a running `sandboxd serve` over HTTP(S) with the
 * configured key. A server that cannot be reached or refuses the key gets a message that
 * says what to do.
 */
export function httpClient(baseUrl: string, apiKey?: string): ApiClient {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    target: base,
    async request(request, signal) {
      let response: Response;
      try {
        response = await fetch(base + urlOf(request), {
          method: request.method,
          headers: {
            ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
            ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
          ...(signal ? { signal } : {}),
        });
      } catch (err) {
        if (signal?.aborted) throw err;
        const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
        throw new ServiceError(
          'BACKEND_UNAVAILABLE',
          `cannot reach the sandboxd server at ${base} (${cause}): check that \`sandboxd serve\` is running there`,
        );
      }
      const text = await response.text();
      try {
        return unwrap(response.status, text);
      } catch (err) {
        if (err instanceof ServiceError && err.code === 'UNAUTHORIZED') {
          throw new ServiceError('UNAUTHORIZED', `${err.message}: give sandboxd mcp the server's key with --api-key or SERVICE_API_KEY`);
        }
        throw err;
      }
    },
  };
}
