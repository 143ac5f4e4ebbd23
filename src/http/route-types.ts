import type { Readable } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { errorEnvelope } from '../schemas/error-schemas.js';
import type { ServiceApi } from '../services/context.js';

/** The Fastify instance type routes are registered on: zod schemas, typed requests. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

export interface RouteContext {
  services: ServiceApi;
  /** How often streams (SSE, /exec/stream) send a heartbeat comment. */
  heartbeatMs: number;
}

/** `{success: true, data}`. */
export const ok = <T>(data: T) => ({ success: true as const, data });

/** Error replies documented on every route (the handler in errors.ts produces them). */
export const errors = (...statuses: number[]) =>
  Object.fromEntries([401, 500, ...statuses].map((status) => [status, errorEnvelope]));

/** A signal that aborts when the client goes away before the reply is sent (its command is killed). */
export function clientGone(reply: FastifyReply): AbortSignal {
  const abort = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  return abort.signal;
}

/**
 * Replies with bytes as they are, under a route whose typed reply describes its JSON form:
 * Fastify sends a Buffer or a stream without serialising it, so the response schema is not
 * involved; a stream is piped as the client takes it, and destroyed if the client goes away.
 */
export function sendBytes(reply: FastifyReply<any>, contentType: string, bytes: Buffer | Readable): FastifyReply<any> {
  return (reply as FastifyReply).type(contentType).send(bytes);
}

/**
 * A documented non-JSON reply (Prometheus text, event streams): an OpenAPI response object
 * passed through to the document as it is, where JSON replies are zod schemas.
 */
export const textReply = (contentType: string, description: string) => ({
  description,
  content: { [contentType]: { schema: { type: 'string' } } },
});
