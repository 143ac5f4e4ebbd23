import { request as httpRequest, Agent as HttpAgent, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import type { Counter } from 'prom-client';
import type { LlmRepository } from '../../state/llm-repository.js';
import type { SandboxRepository } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { EventBus } from '../events/event-bus.js';
import { isoNow, type Clock } from '../support/clock.js';
import { KeyScrubber } from './key-scrubber.js';
import type { LlmKeys } from './llm-keys.js';
import { PROVIDER_ALIASES, type LlmProvider, type ProviderFormat } from './llm-providers.js';
import { UsageMeter, type MeteredUsage } from './llm-usage-meter.js';
import { looksLikeToken, type SandboxTokens } from './sandbox-token.js';
import { textDeeperThan } from '../../domain/json-depth.js';

/** The most of a request body the gateway reads (it may add stream_options to it). */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
/** Headers of one hop, never forwarded (RFC 9110 7.6.1), and those the gateway sets itself. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length']);
/** Where clients put their key; every one is dropped, then the provider's header is set. */
const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key'];

export interface LlmGatewayInput {
  keys: LlmKeys;
  tokens: SandboxTokens;
  sandboxes: SandboxRepository;
  usage: LlmRepository;
  bus: EventBus;
  clock: Clock;
  logger: Logger;
  tokensCounter: Counter<'provider' | 'direction'>;
  /** Add `stream_options.include_usage` to OpenAI Chat streams that lack it ([llm].stream_usage). */
  streamUsage: boolean;
}

/** A refusal of the gateway itself, answered in the provider's error format. */
class GatewayRefusal extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The LLM gateway, `/llm/<provider>/<path>` on the proxy port: it maps the placeholder key a
 * sandbox sends (its sandbox token) to the sandbox, drops it, sets the provider's real key, and
 * forwards to `<base_url>/<path>`; the answer streams back as it comes (each chunk is written
 * when it arrives; an echo of the real key is masked). Token usage is read from the provider's own `usage` in the answer (no
 * tokenizer) and added to the sandbox's row of the day.
 */
export class LlmGateway {
  private readonly agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };
  /** Sandboxes whose budget refusal was published, so that a looping client does not flood the bus. */
  private readonly budgetAnnounced = new Set<string>();

  constructor(private readonly input: LlmGatewayInput) {}

  /** Serves one request under `/llm/`. */
  async handle(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    const [, , given = '', ...rest] = path.split('/');
    const name = PROVIDER_ALIASES[given] ?? given;
    const resolved = name ? await this.input.keys.resolve(name) : undefined;
    const format: ProviderFormat = resolved?.provider.format ?? 'openai';
    try {
      if (!resolved) {
        const known = (await this.input.keys.providers()).map((p) => p.name).join(', ');
        throw new GatewayRefusal(404, 'not_found_error', `unknown LLM provider '${given}': the gateway serves ${known} (/llm/<provider>/...)`);
      }
      const url = new URL(request.url ?? '/', 'http://gateway');
      const sandboxUuid = this.sandboxOf(request, url);
      const sandbox = await this.input.sandboxes.byUuid(sandboxUuid);
      if (!sandbox) throw new GatewayRefusal(401, 'authentication_error', 'the sandbox this token was made for no longer exists');
      if (!resolved.key) {
        throw new GatewayRefusal(503, 'api_error', `the gateway has no key for ${resolved.provider.name}: an administrator of sandboxd sets one (its LLM key /llm/keys/${resolved.provider.name})`);
      }
      await this.checkBudget(sandbox);
      const body = await readBody(request);
      const prepared = prepareBody(resolved.provider, request.method ?? 'GET', rest.join('/'), body, this.input.streamUsage);
      const target = new URL(`${resolved.provider.baseUrl}/${rest.join('/')}`);
      url.searchParams.forEach((value, key) => {
        if (!(key === 'key' && looksLikeToken(value))) target.searchParams.append(key, value);
      });
      await this.forward({ request, response, provider: resolved.provider, key: resolved.key, target, sandbox, ...prepared });
    } catch (err) {
      if (!(err instanceof GatewayRefusal)) throw err;
      // The rest of a body too large to read is not read: the connection cannot serve another request.
      if (err.status === 413) response.setHeader('connection', 'close');
      sendError(response, format, err.status, err.kind, err.message);
    }
  }

  /** Ends the kept-alive upstream connections. */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  /** The sandbox uuid of the token in the request (a key header, or Gemini's `?key=`); 401 otherwise. */
  private sandboxOf(request: IncomingMessage, url: URL): string {
    const candidates = [
      ...KEY_HEADERS.map((h) => request.headers[h]).filter((v): v is string => typeof v === 'string').map((v) => v.replace(/^Bearer\s+/i, '').trim()),
      url.searchParams.get('key') ?? '',
    ].filter(looksLikeToken);
    if (candidates.length === 0) {
      throw new GatewayRefusal(401, 'authentication_error', "no sandbox token: send the sandbox's placeholder key (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) as the API key");
    }
    const uuids = new Set(candidates.map((token) => this.input.tokens.verify(token)));
    const [uuid] = uuids;
    if (uuids.size !== 1 || uuid === undefined) throw new GatewayRefusal(401, 'authentication_error', 'the sandbox token is not valid');
    return uuid;
  }

  private async checkBudget(sandbox: { uuid: string; name: string; labels: Record<string, string> }): Promise<void> {
    const budget = await this.input.usage.budget(sandbox.uuid);
    if (budget === undefined) return;
    const used = await this.input.usage.tokensUsed(sandbox.uuid);
    if (used < budget) return;
    if (!this.budgetAnnounced.has(sandbox.uuid)) {
      this.budgetAnnounced.add(sandbox.uuid);
      this.input.bus.publish({
        type: 'llm.budget_exceeded',
        timestamp: isoNow(this.input.clock),
        sandbox: sandbox.name,
        sandbox_uuid: sandbox.uuid,
        labels: sandbox.labels,
        metadata: { budget_tokens: budget, used_tokens: used },
      });
    }
    throw new GatewayRefusal(429, 'rate_limit_error', `the sandbox's LLM token budget is spent (${used} of ${budget} tokens)`);
  }

  private async forward(call: {
    request: IncomingMessage;
    response: ServerResponse;
    provider: LlmProvider;
    key: string;
    target: URL;
    sandbox: { uuid: string; name: string };
    body: Buffer;
    model: string | undefined;
    stripUsageChunk: boolean;
  }): Promise<void> {
    const { request, response, provider, target } = call;
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (value !== undefined && !HOP_HEADERS.has(name) && !KEY_HEADERS.includes(name)) headers[name] = value;
    }
    headers[provider.auth.header] = provider.auth.scheme ? `${provider.auth.scheme} ${call.key}` : call.key;
    // Usage is read from the answer: it must come uncompressed.
    headers['accept-encoding'] = 'identity';
    if (call.body.length > 0 || !['GET', 'HEAD'].includes(request.method ?? 'GET')) headers['content-length'] = call.body.length;
    const secure = target.protocol === 'https:';
    const send = secure ? httpsRequest : httpRequest;
    const started = Date.now();
    await new Promise<void>((resolve) => {
      let settled = false;
      const done = (usage: MeteredUsage | undefined, failed: boolean) => {
        if (settled) return;
        settled = true;
        void this.record(call.sandbox, provider.name, usage?.model ?? call.model, usage, failed)
          .catch((err: Error) => this.input.logger.error({ err }, 'LLM usage not recorded'))
          .finally(resolve);
      };
      const upstream = send(target, { method: request.method ?? 'GET', headers, agent: secure ? this.agents.https : this.agents.http });
      upstream.on('response', (answer) => {
        const meter = new UsageMeter({ contentType: String(answer.headers['content-type'] ?? ''), stripUsageChunk: call.stripUsageChunk });
        const scrubber = new KeyScrubber(call.key);
        const out: OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !HOP_HEADERS.has(name)) out[name] = value;
        }
        // Stripping a chunk changes the length; otherwise the upstream's length holds.
        if (answer.headers['content-length'] !== undefined && !call.stripUsageChunk) out['content-length'] = answer.headers['content-length'];
        response.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        response.flushHeaders();
        answer.on('data', (chunk: Buffer) => {
          const passed = scrubber.push(meter.push(chunk));
          if (passed.length > 0) response.write(passed);
        });
        answer.on('end', () => {
          const rest = Buffer.concat([scrubber.push(meter.flush()), scrubber.flush()]);
          response.end(rest.length > 0 ? rest : undefined);
          done(meter.result(), (answer.statusCode ?? 502) >= 400);
        });
        answer.on('error', () => {
          response.destroy();
          done(meter.result(), true);
        });
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        this.input.logger.warn({ provider: provider.name, upstream: target.host, code: err.code, ms: Date.now() - started }, 'LLM upstream failed');
        if (!response.headersSent) {
          sendError(response, provider.format, 502, 'api_error', `the gateway could not reach ${provider.name} at ${target.host}: ${err.code ?? err.message}`);
        } else {
          response.destroy();
        }
        done(undefined, true);
      });
      // A client that goes away takes the upstream request with it.
      response.on('close', () => {
        if (!response.writableFinished) upstream.destroy();
      });
      upstream.end(call.body);
    });
  }

  private async record(sandbox: { uuid: string; name: string }, provider: string, model: string | undefined, usage: MeteredUsage | undefined, failed: boolean): Promise<void> {
    const input = usage?.input ?? 0;
    const output = usage?.output ?? 0;
    await this.input.usage.addUsage({
      day: isoNow(this.input.clock).slice(0, 10),
      sandbox_uuid: sandbox.uuid,
      sandbox: sandbox.name,
      provider,
      model: model ?? '',
      requests: 1,
      input_tokens: input,
      output_tokens: output,
      errors: failed ? 1 : 0,
      unmetered_requests: !failed && usage === undefined ? 1 : 0,
    });
    if (input > 0) this.input.tokensCounter.inc({ provider, direction: 'input' }, input);
    if (output > 0) this.input.tokensCounter.inc({ provider, direction: 'output' }, output);
    this.input.logger.debug({ sandbox: sandbox.name, provider, model, input_tokens: input, output_tokens: output, failed }, 'LLM request');
  }
}

/** Reads a request body whole; 413 past MAX_REQUEST_BYTES. */
async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES) throw new GatewayRefusal(413, 'request_too_large', `the request body is larger than ${MAX_REQUEST_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * The body to forward and what it says: the model (Gemini names it in the path), and for an
 * OpenAI Chat stream without `stream_options.include_usage`, the body with it added (when
 * `streamUsage`), whose usage-only last chunk the client then does not get.
 */
export function prepareBody(provider: LlmProvider, method: string, path: string, body: Buffer, streamUsage: boolean): { body: Buffer; model: string | undefined; stripUsageChunk: boolean } {
  const pathModel = /models\/([^/:]+)/.exec(path)?.[1];
  let parsed: Record<string, unknown> | undefined;
  // A body nested past the limit is forwarded as it is, unread (as one that is not JSON).
  if (body.length > 0 && !textDeeperThan(body.toString('utf8'))) {
    try {
      const value: unknown = JSON.parse(body.toString('utf8'));
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) parsed = value as Record<string, unknown>;
    } catch {
      // Not JSON: forwarded as it is.
    }
  }
  const model = typeof parsed?.model === 'string' ? parsed.model : pathModel;
  const options = parsed?.stream_options;
  const wantsUsage = typeof options === 'object' && options !== null && 'include_usage' in options;
  if (!streamUsage || provider.format !== 'openai' || method !== 'POST' || !path.endsWith('chat/completions') || parsed?.stream !== true || wantsUsage) {
    return { body, model, stripUsageChunk: false };
  }
  const streamOptions = typeof options === 'object' && options !== null ? options : {};
  const rewritten = Buffer.from(JSON.stringify({ ...parsed, stream_options: { ...streamOptions, include_usage: true } }), 'utf8');
  return { body: rewritten, model, stripUsageChunk: true };
}

/** An error in the provider's own format, so that its SDK shows the message. */
export function sendError(response: ServerResponse, format: ProviderFormat, status: number, kind: string, message: string): void {
  const full = `sandboxd LLM gateway: ${message}`;
  const body =
    format === 'anthropic'
      ? { type: 'error', error: { type: kind, message: full } }
      : format === 'google'
        ? { error: { code: status, message: full, status: GOOGLE_STATUS[status] ?? 'UNKNOWN' } }
        : { error: { message: full, type: kind, code: kind } };
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

const GOOGLE_STATUS: Record<number, string> = { 401: 'UNAUTHENTICATED', 404: 'NOT_FOUND', 413: 'INVALID_ARGUMENT', 429: 'RESOURCE_EXHAUSTED', 502: 'UNAVAILABLE', 503: 'UNAVAILABLE' };
