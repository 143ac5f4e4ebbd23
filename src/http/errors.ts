import type { FastifyError, FastifyInstance } from 'fastify';
import { isServiceError, STATUS_BY_CODE, type ErrorCode } from '../errors.js';

export const BODY_LIMIT_BYTES = 16 * 1024 * 1024;

/** Fastify's own client errors, mapped to the error table. */
const FASTIFY_CODES: Record<string, [ErrorCode, string?]> = {
  FST_ERR_VALIDATION: ['BAD_REQUEST'],
  FST_ERR_CTP_BODY_TOO_LARGE: ['PAYLOAD_TOO_LARGE', 'request body exceeds the 16 MiB limit'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['BAD_REQUEST', 'Content-Length does not match the body'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['BAD_REQUEST', 'unsupported Content-Type: send application/json'],
};

/**
 * One handler turns every failure into the error envelope
 * `{success:false, error, code}`. A 5xx never carries internals; a client fault is never 5xx.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    let code: ErrorCode;
    let message: string;
    if (isServiceError(error)) {
      code = error.code;
      message = error.message;
    } else if (error.code && FASTIFY_CODES[error.code]) {
      const [mapped, text] = FASTIFY_CODES[error.code]!;
      code = mapped;
      message = text ?? error.message;
    } else if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      code = 'BAD_REQUEST';
      message = `malformed JSON body: ${error.message}`;
    } else if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      code = error.statusCode === 413 ? 'PAYLOAD_TOO_LARGE' : 'BAD_REQUEST';
      message = error.message;
    } else {
      request.log.error({ err: error }, 'internal error');
      code = 'INTERNAL';
      message = 'internal error: see the server log';
    }
    return reply.status(STATUS_BY_CODE[code]).send({ success: false, error: message, code });
  });

  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ success: false, error: `route ${request.method} ${request.url.split('?')[0]} not found`, code: 'NOT_FOUND' }),
  );

  // JSON for application/json and for bodies sent without a JSON content type (curl -d);
  // an empty body is no body, so POST /start with Content-Type: application/json works.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    if (typeof body === 'string' && body.trim() === '') return done(null, undefined);
    json(request, body as string, done);
  });
}
