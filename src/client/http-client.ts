import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { ServiceError } from '../errors.js';
import { unwrap, urlOf, type ApiClient, type ApiRequest } from './api-client.js';
import { SseReader } from './sse-reader.js';

export interface HttpClientOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Certificates to trust for HTTPS (e.g. the server's self-signed one besides the usual roots). */
  ca?: string[];
  /** What to do about a refused key, in the words of the face that uses this client. */
  unauthorizedAdvice?: string;
}

const MCP_KEY_ADVICE = "give sandboxd mcp the server's key with --api-key or SERVICE_API_KEY";

/**
 * The remote client: requests go to a running `sandboxd serve` over HTTP(S) with the
 * configured key. Aborting a call drops its connection, which kills its command on the
 * server. A server that cannot be reached or refuses the key gets a message that says what
 * to do.
 */
export function httpClient(baseUrl: string, { apiKey, ca, unauthorizedAdvice = MCP_KEY_ADVICE }: HttpClientOptions = {}): ApiClient {
  const base = baseUrl.replace(/\/+$/, '');
  /** One request: the reply's data (nothing for an event stream, handed to `onStream`). */
  const call = async (request: ApiRequest, signal: AbortSignal | undefined, onStream?: (chunk: Buffer) => void): Promise<unknown> => {
    let reply: { status: number; text: string };
    try {
      reply = await send(new URL(base + urlOf(request)), request, { apiKey, ca, signal, onStream });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ServiceError(
        'BACKEND_UNAVAILABLE',
        `cannot reach the sandboxd server at ${base} (${(err as Error).message}): check that \`sandboxd serve\` is running there`,
      );
    }
    if (onStream && reply.status === 200) return undefined;
    try {
      return unwrap(reply.status, reply.text);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'UNAUTHORIZED') {
        throw new ServiceError('UNAUTHORIZED', `${err.message}: ${unauthorizedAdvice}`);
      }
      throw err;
    }
  };
  return {
    target: base,
    async request<T>(request: ApiRequest, signal?: AbortSignal) {
      return (await call(request, signal)) as T;
    },
    async stream(request, onEvent, signal) {
      const reader = new SseReader(onEvent);
      const decoder = new StringDecoder('utf8');
      await call({ ...request, headers: { ...request.headers, accept: 'text/event-stream' } }, signal, (chunk) => reader.push(decoder.write(chunk)));
    },
  };
}

/** One request with node:http(s), which, unlike fetch, takes the certificates to trust. */
function send(
  url: URL,
  { method, body, headers: extra }: ApiRequest,
  { apiKey, ca, signal, onStream }: Omit<HttpClientOptions, 'unauthorizedAdvice'> & { signal?: AbortSignal | undefined; onStream?: ((chunk: Buffer) => void) | undefined },
): Promise<{ status: number; text: string }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = {
    ...extra,
    ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
  };
  return new Promise((resolve, reject) => {
    const onReply = (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      // A 200 event stream goes to onStream as it arrives; anything else is collected.
      const streamed = onStream && res.statusCode === 200 && String(res.headers['content-type']).startsWith('text/event-stream');
      res.on('data', (chunk: Buffer) => (streamed ? onStream(chunk) : chunks.push(chunk)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const options = { method, headers, ...(signal ? { signal } : {}) };
    const req = url.protocol === 'https:' ? httpsRequest(url, { ...options, ...(ca ? { ca } : {}) }, onReply) : httpRequest(url, options, onReply);
    req.on('error', reject);
    req.end(payload);
  });
}
