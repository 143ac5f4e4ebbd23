import type { IncomingMessage } from 'node:http';
import { textDeeperThan, TOO_DEEP } from '../domain/json-depth.js';
import type { FastifyError, FastifyInstance } from 'fastify';
import { badRequest, isServiceError, STATUS_BY_CODE, withNextStep, type ErrorCode, type NextStepRenderers, type ServiceError } from '../errors.js';

export const BODY_LIMIT_BYTES = 16 * 1024 * 1024;
/**
 * Most bytes of a too large body read and discarded before the 413 is sent. A client such as
 * Node's fetch reads an answer only once it has sent its whole body: answering and closing
 * earlier cuts it off with a socket error (EPIPE) instead of the 413. A larger body is answered
 * at once, and the request time-out bounds the wait.
 */
export const MAX_DISCARDED_BYTES = 64 * 1024 * 1024;

/** Fastify's own client errors, mapped to the error table. */
const FASTIFY_CODES: Record<string, [ErrorCode, string?]> = {
  FST_ERR_VALIDATION: ['BAD_REQUEST'],
  FST_ERR_CTP_BODY_TOO_LARGE: ['PAYLOAD_TOO_LARGE'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['BAD_REQUEST', 'Content-Length does not match the body'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['BAD_REQUEST', 'unsupported Content-Type: send application/json'],
};

/** The next steps in the words of this API: the route that does it. */
export const HTTP_NEXT_STEPS: NextStepRenderers = {
  start: ({ sandbox }) => `start it with POST /sandboxes/${sandbox}/start`,
  recover: ({ sandbox, then }) =>
    then === 'start'
      ? `recover it with POST /sandboxes/${sandbox}/recover, then start it`
      : `recover it first with POST /sandboxes/${sandbox}/recover`,
  browser_open: ({ sandbox, page }) => `open it with POST /sandboxes/${sandbox}/browser/pages/${page}/goto`,
  browser_snapshot: ({ sandbox, page, use_refs }) =>
    `take a new snapshot (GET /sandboxes/${sandbox}/browser/pages/${page})${use_refs ? ' and use its refs' : ''}`,
  list_directory: ({ sandbox, path }) => `list it with GET /sandboxes/${sandbox}/fs?path=${path}`,
  list_images: () => 'list the built images with GET /images',
  create_volume: () => 'create it with POST /volumes',
  store_execute: ({ store }) => `use POST /stores/${store ?? '{id}'}/execute`,
  store_ops: ({ store, ops }) => `it answers ${ops.map((op) => `POST /stores/${store}/${op}`).join(' and ')}`,
  register_class: () => 'register it first with POST /objects/classes',
  delete_proxy_hook: ({ hook }) => `delete it first with DELETE /proxy/hooks/${hook}`,
  set_llm_key: ({ provider }) => `store the key with PUT /llm/keys/${provider ?? '{provider}'}`,
  mint_terminal_token: ({ sandbox }) => `mint one with POST /sandboxes/${sandbox}/pty/token`,
};

/** A service error's message as HTTP clients read it: with its next step naming the route. */
export const httpMessage = (error: ServiceError): string => withNextStep(error.message, error.hint, HTTP_NEXT_STEPS);

/** The envelope of a service error; `problem` and `hint` only when there is a next step. */
function serviceEnvelope(error: ServiceError) {
  const { code, hint, details } = error;
  return {
    success: false,
    error: httpMessage(error),
    code,
    ...(hint ? { problem: error.message, hint } : {}),
    ...(details ? { details } : {}),
  };
}

/**
 * One handler turns every failure into the error envelope `{success:false, error, code}`,
 * plus, when the error has them, `hint` (the next step as data) with `problem` (the message
 * without the step, for faces that say the step their own way) and `details`. A 5xx never
 * carries internals; a client fault is never 5xx.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') await discardBody(request.raw, MAX_DISCARDED_BYTES);
    if (isServiceError(error)) return reply.status(STATUS_BY_CODE[error.code]).send(serviceEnvelope(error));
    let code: ErrorCode;
    let message: string;
    const known = error.code ? FASTIFY_CODES[error.code] : undefined;
    if (known) {
      const [mapped, text] = known;
      code = mapped;
      message = text ?? error.message;
      // The limit of the route (POST /images takes more than the 16 MiB of the others).
      if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') message = `request body exceeds the ${Math.round((request.routeOptions.bodyLimit ?? BODY_LIMIT_BYTES) / 1024 / 1024)} MiB limit`;
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
  // A body that is not JSON under another content type (a form) is told what it sent.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    if (typeof body === 'string' && body.trim() === '') return done(null, undefined);
    if (typeof body === 'string' && textDeeperThan(body)) return done(tooDeep(), undefined);
    const sent = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
    if (!sent || JSON_TYPE.test(sent)) return json(request, body as string, done);
    json(request, body as string, (err, value) =>
      err ? done(notJson(sent, (request.routeOptions.schema as { consumes?: string[] } | undefined)?.consumes), undefined) : done(null, value),
    );
  });
}

const tooDeep = (): ServiceError => badRequest(`body: ${TOO_DEEP}`);

/** application/json and the structured +json types. */
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/;

/** A body under a content type other than JSON that is not JSON either; a route that takes no JSON names what it takes. */
const notJson = (sent: string, consumes?: string[]): ServiceError =>
  consumes && !consumes.includes('application/json')
    ? badRequest(`content-type: the body was sent as ${sent}; send it with Content-Type: ${consumes.join(' or ')}`)
    : badRequest(`content-type: the body was sent as ${sent} and is not JSON; send a JSON body with Content-Type: application/json`);

/**
 * Reads and drops the rest of a request body, up to `limit` bytes (a body that says it is larger
 * is not waited for); resolves when it has ended, broke off or passed the limit.
 */
function discardBody(raw: IncomingMessage, limit: number): Promise<void> {
  const declared = Number(raw.headers['content-length']);
  if (raw.complete || raw.destroyed || declared > limit) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const finish = () => {
      raw.off('data', onData).off('end', finish).off('error', finish).off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > limit) finish();
    };
    raw.on('data', onData).on('end', finish).on('error', finish).on('close', finish);
    raw.resume();
  });
}
