import swagger from '@fastify/swagger';
import type { ServerOptions } from 'node:http';
import Fastify, { type FastifyReply, type FastifyServerOptions } from 'fastify';
import { pino } from 'pino';
import { jsonSchemaTransform, jsonSchemaTransformObject, serializerCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { ZodType } from 'zod';
import { VERSION } from '../paths.js';
import { RAW_BYTES_TYPE } from '../schemas/file-schemas.js';
import type { ServiceApi } from '../services/context.js';
import { domainRoutes } from '../services/domains.js';
import type { Logger } from '../telemetry/logger.js';
import { principalsOf, type ApiKey } from '../domain/principals.js';
import { registerAuth } from './auth.js';
import { previewGrant, previewRewrite } from './preview-access.js';
import { closeWithin, timeRequestBodies } from './request-timeouts.js';
import { registerPolicy } from './policy.js';
import { BODY_LIMIT_BYTES, registerErrorHandling } from './errors.js';
import type { App } from './route-types.js';
import { registerRequestTelemetry } from './request-telemetry.js';
import { serviceRoutes } from './routes/service-routes.js';
import { DEFAULT_WEB_ROOT, uiRoutes } from './routes/ui-routes.js';
import { webhookDocument } from './routes/event-routes.js';
import { operationIdFor, tidyDocument } from './openapi-document.js';
import { zodValidatorCompiler } from './validation.js';
import { registerQueryCheck } from './query-check.js';
import { registerWebSocketUpgrades } from './websocket-upgrade.js';

export interface AppOptions {
  services: ServiceApi;
  /** Unnamed keys (flags, key file, SERVICE_API_KEY, [api].api_key). */
  apiKeys: string[];
  /** Keys named in [[api.keys]], with their admin flags and labels. */
  namedKeys?: ApiKey[];
  logger: Logger;
  /** Passed to Fastify for HTTPS. */
  https?: { cert: string; key: string };
  /** Heartbeat comment interval of GET /events (15 s). */
  eventsHeartbeatMs?: number;
  /** Longest a client may take to send a request's headers, then its body (REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
  /** The built dashboard served at /ui/ and /docs (dist/web). */
  webRoot?: string;
}

/**
 * Longest a client may take to send a request's headers, and then its body; past it the
 * connection is answered 408 and closed. It ends when the request has arrived, so replies that
 * take long (an exec up to its timeout_ms, an SSE stream) are not limited by it. A preview's body
 * is timed on idleness: it may take as long as it keeps coming.
 */
export const REQUEST_TIMEOUT_MS = 30_000;

/** Longest a stop waits for the connections under way (requests, WebSockets, preview uploads) before it cuts them. */
export const CLOSE_GRACE_MS = 5_000;

/** Longest parameter of a path (a sandbox name is at most 63; a file path is the wildcard, which has no limit here). */
const MAX_PARAM_LENGTH = 100;

type JsonSchema = Record<string, unknown> & { anyOf?: JsonSchema[] };
type DocumentedSchema = { body?: JsonSchema; response?: Record<string, JsonSchema>; consumes?: string[]; produces?: string[] };

/**
 * Routes that also take or give a file's bytes as they are (`consumes` / `produces` naming
 * application/octet-stream) get one schema per media type: the JSON form for JSON, a binary
 * string for the raw bytes. The raw branch of a body union has no JSON Schema and drops out.
 */
function documentRawBytes(schema: DocumentedSchema): void {
  const binary = { schema: { type: 'string', format: 'binary' } };
  const split = (json: JsonSchema) => {
    // Identifiers of the whole schema, which the plugin drops where it places the schema itself.
    const only = json.anyOf?.length === 1 ? json.anyOf[0] : undefined;
    const { $id: _id, $schema: _schema, ...rest } = only ?? json;
    return { 'application/json': { schema: rest }, [RAW_BYTES_TYPE]: binary };
  };
  if (schema.body && schema.consumes?.includes(RAW_BYTES_TYPE)) {
    schema.body = { content: split(schema.body) };
    delete schema.consumes;
  }
  const responses = schema.response;
  const ok = responses?.['200'];
  if (responses && ok && schema.produces?.includes(RAW_BYTES_TYPE)) {
    responses['200'] = { description: 'Success', content: split(ok) };
    delete schema.produces;
  }
}

/** The quieter of two pino levels. */
function quieter(a: string, b: string): string {
  const rank = (level: string) => (level === 'silent' ? Infinity : (pino.levels.values[level] ?? 0));
  return rank(a) >= rank(b) ? a : b;
}

/**
 * The HTTP face: envelope, error table, request metrics and spans, auth, 16 MiB body limit,
 * JSON 404s, OpenAPI 3.1 generated from the zod schemas that validate the requests.
 */
export async function buildApp({
  services,
  apiKeys,
  namedKeys = [],
  logger,
  https,
  eventsHeartbeatMs = 15_000,
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
  webRoot = DEFAULT_WEB_ROOT,
}: AppOptions): Promise<App> {
  // Node times the headers, checking this often (30 s by default, as long as the limit itself);
  // bodies are timed by timeRequestBodies, a preview upload's on idleness.
  const timeouts = {
    requestTimeout: 0,
    headersTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs),
  };
  const options: FastifyServerOptions & { http: ServerOptions } = {
    // Per-request lines would cost more than an exec: at most warnings, never more than the parent.
    loggerInstance: logger.child({ part: 'http' }, { level: quieter(logger.level, 'warn') }),
    bodyLimit: BODY_LIMIT_BYTES,
    // Headers, then a body, that have not arrived within requestTimeoutMs are cut. Only the
    // arrival is timed: a reply may take as long as it needs (exec, SSE).
    http: timeouts,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Preview hosts (<port>-<name>.<preview domain>) go to the preview proxy whatever their path.
    rewriteUrl: previewRewrite(services.preview),
    // A path that is not valid percent-encoding (`/sandboxes/%ZZ`) or has an over-long parameter
    // never reaches a route: it gets the envelope too, and a 400.
    frameworkErrors: (error, request, reply: FastifyReply) => {
      const path = request.url.split('?')[0];
      const problem =
        error.code === 'FST_ERR_BAD_URL'
          ? `path: '${path}' is not valid percent-encoding`
          : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
            ? `path: a parameter of the path is longer than ${MAX_PARAM_LENGTH} characters`
            : undefined;
      if (!problem) request.log.error({ err: error }, 'framework error');
      void reply.status(problem ? 400 : 500).send({
        success: false,
        error: problem ?? 'internal error: see the server log',
        code: problem ? 'BAD_REQUEST' : 'INTERNAL',
      });
    },
  };
  // The HTTPS server type differs only in its raw server; routes never touch it.
  const server = https ? Fastify({ ...options, https: { ...https, ...timeouts } } as FastifyServerOptions) : Fastify(options);
  const app = server.withTypeProvider<ZodTypeProvider>() as App;
  timeRequestBodies(app.server, requestTimeoutMs);
  // A stop waits for requests under way for CLOSE_GRACE_MS at most, then cuts what is left.
  const stop = closeWithin(app.server, CLOSE_GRACE_MS);
  app.addHook('preClose', async () => stop.stopping());

  app.setValidatorCompiler(zodValidatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  registerRequestTelemetry(app, services.observability.metrics, services.observability.tracing);
  const keys = principalsOf(namedKeys, apiKeys);
  registerAuth(app, keys, {
    // A browser cannot set a WebSocket's headers: a terminal takes a one-use token instead.
    'GET /sandboxes/:name/pty': (request) => {
      const { token } = request.query as { token?: unknown };
      const { name } = request.params as { name?: string };
      return typeof token === 'string' ? services.terminals.redeem(token, name ?? '') : undefined;
    },
  }, previewGrant(services.preview));
  services.policy.knowPrincipals(keys);
  registerPolicy(app, services);
  registerQueryCheck(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'sandboxd',
        version: VERSION,
        description: 'Isolated sandboxes for untrusted commands: HTTP/JSON API. Paths carry no version prefix.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        },
      },
      // Relative: the server that serves the document (clients put their own base URL in front).
      servers: [{ url: '/', description: 'the sandboxd server that serves this document' }],
      security: keys.length ? [{ bearer: [] }, { apiKeyHeader: [] }] : [],
      webhooks: webhookDocument,
    },
    transform: (input) => {
      // Non-JSON replies (textReply) are OpenAPI response objects already; the zod transform takes the rest.
      const responses = Object.entries((input.schema?.response ?? {}) as Record<string, unknown>);
      const isZod = (s: unknown) => s instanceof ZodType;
      const { schema, url } = jsonSchemaTransform({
        ...input,
        schema: { ...input.schema, response: Object.fromEntries(responses.filter(([, s]) => isZod(s))) },
      });
      schema.response = { ...(schema.response as object), ...Object.fromEntries(responses.filter(([, s]) => !isZod(s))) };
      documentRawBytes(schema as DocumentedSchema);
      const [method = 'GET'] = [input.route.method].flat();
      (schema as { operationId?: string }).operationId ??= operationIdFor(method, input.url);
      // The wildcard of the file routes is the file path.
      if (!url.includes('*')) return { schema, url };
      const params = schema.params as { properties?: Record<string, unknown>; required?: string[] } | undefined;
      if (params?.properties?.['*']) {
        params.properties = { ...params.properties, path: params.properties['*'] };
        delete params.properties['*'];
        params.required = params.required?.map((r) => (r === '*' ? 'path' : r));
      }
      return { schema, url: url.replace('*', ':path') };
    },
    transformObject: (input) => tidyDocument(jsonSchemaTransformObject(input)),
  });

  registerWebSocketUpgrades(app);
  const context = { services, heartbeatMs: eventsHeartbeatMs };
  await app.register(serviceRoutes, context);
  for (const routes of domainRoutes()) await app.register(routes, context);
  await app.register(uiRoutes, { webRoot });
  return app;
}
