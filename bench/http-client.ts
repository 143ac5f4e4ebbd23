import { Agent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * The bench's one HTTP client, for the API and for every HTTP alternative it is compared with:
 * node:http on kept-alive connections, as a fast client of the service would use. fetch
 * (undici) on Node 20 costs ~1.2 ms of client CPU per request more than this, which would be
 * measured as the server's.
 */
const agents = { http: new Agent({ keepAlive: true, maxSockets: 64 }), https: new HttpsAgent({ keepAlive: true, maxSockets: 64 }) };

export interface BenchResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** One request, read to its end. A string or object body is sent as JSON unless a content-type is given. */
export function send(
  method: string,
  url: string,
  body?: Buffer | string | object,
  headers: Record<string, string> = {},
): Promise<BenchResponse> {
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const secure = url.startsWith('https:');
  return new Promise((resolve, reject) => {
    const req = (secure ? httpsRequest : httpRequest)(
      url,
      {
        method,
        agent: secure ? agents.https : agents.http,
        headers: {
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The response body as JSON. */
export const json = (res: BenchResponse): any => JSON.parse(res.body.toString('utf8'));
