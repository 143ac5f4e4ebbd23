import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ServiceError } from '../errors.js';
import { unwrap, urlOf, type ApiRequest } from './api-client.js';

/**
 * A request whose reply is read as a stream: JSON `body`, or raw bytes in `rawBody` (of
 * `contentType`, application/octet-stream unless named); `accept` names what it wants back.
 */
export type StreamRequest = ApiRequest & { rawBody?: Buffer; contentType?: string; accept?: string };

/** How a streamed request authenticates and what a refused key should advise. */
export interface StreamOptions {
  apiKey: string | undefined;
  /** Certificates to trust for HTTPS besides the usual roots. */
  ca: string[] | undefined;
  signal: AbortSignal | undefined;
  /** What to do about a refused key, in the words of the face that sends the request. */
  unauthorizedAdvice: string;
}

/**
 * Sends one request to the server at `base` and resolves with its reply as a stream (SSE, raw
 * bytes) once the status is a 2xx; any other reply is thrown as the server's ServiceError, an
 * unreachable server as BACKEND_UNAVAILABLE.
 */
export async function openStream(
  base: string,
  { method, body, rawBody, contentType, accept, headers: extra, ...rest }: StreamRequest,
  { apiKey, ca, signal, unauthorizedAdvice }: StreamOptions,
): Promise<IncomingMessage> {
  const url = new URL(base + urlOf({ method, ...rest }));
  const payload = rawBody ?? (body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
  const headers = {
    ...extra,
    ...(accept ? { accept } : {}),
    ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    ...(payload ? { 'content-type': rawBody ? (contentType ?? 'application/octet-stream') : 'application/json' } : {}),
  };
  let response: IncomingMessage;
  try {
    response = await new Promise<IncomingMessage>((resolve, reject) => {
      const options = { method, headers, ...(signal ? { signal } : {}) };
      const req = url.protocol === 'https:' ? httpsRequest(url, { ...options, ...(ca ? { ca } : {}) }, resolve) : httpRequest(url, options, resolve);
      req.on('error', reject);
      req.end(payload);
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new ServiceError('BACKEND_UNAVAILABLE', `cannot reach the sandboxd server at ${base} (${(err as Error).message}): check that \`sandboxd serve\` is running there`);
  }
  const status = response.statusCode ?? 0;
  if (status >= 200 && status < 300) return response;
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  try {
    unwrap(status, Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'UNAUTHORIZED') throw new ServiceError('UNAUTHORIZED', `${err.message}: ${unauthorizedAdvice}`);
    throw err;
  }
  throw new ServiceError('INTERNAL', `unexpected reply (HTTP ${status})`);
}
