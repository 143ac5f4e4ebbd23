import { lookup } from 'node:dns/promises';
import { Agent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { rootCertificates } from 'node:tls';
import type { Counter } from 'prom-client';
import { canonicalHost, destinationsOf, unbracket } from '../../domain/destinations.js';
import { plainAddress } from '../../domain/private-addresses.js';
import type { Logger } from '../../telemetry/logger.js';
import { isoNow, type Clock } from '../support/clock.js';
import type { InternalAddresses } from './internal-addresses.js';
import type { ProxyHooks, ProxyRequestFacts } from './proxy-hooks.js';
import type { ProxyLog } from './proxy-log.js';
import type { ForwardProxy } from './proxy-server.js';
import type { SandboxSecrets } from './sandbox-secrets.js';
import type { EgressCa } from './egress-ca.js';
import { relayAnswer } from './scrubbed-answer.js';
import { TlsInterceptor } from './tls-interceptor.js';

/** How a sandbox may reach out (the sandbox's `network` field). */
export interface SandboxEgress {
  egress: 'open' | 'proxy' | 'none';
  allow: string[];
  deny: string[];
}

/** A sandbox's egress rules by uuid, read per request (so a PATCH applies at once); undefined for no such sandbox. */
export type EgressLookup = (sandboxUuid: string) => SandboxEgress | undefined | Promise<SandboxEgress | undefined>;

/** Host name to addresses (dns.lookup by default; tests map names to local upstreams). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export interface EgressProxyInput {
  tokens: { verify(token: string): string | undefined };
  egressOf: EgressLookup;
  sandboxes: { byUuid(uuid: string): Promise<{ name: string; uuid: string; labels: Record<string, string> } | undefined> };
  hooks: ProxyHooks;
  secrets: SandboxSecrets;
  log: ProxyLog;
  internal: InternalAddresses;
  decisions: Counter<'decision'>;
  /** Publishes `proxy.denied` (rate-limited per sandbox and host). */
  denied: (facts: ProxyRequestFacts, reason: string) => void;
  clock: Clock;
  logger: Logger;
  resolve?: Resolver;
  /** Idle time of a forwarded request (also to connect) before 504; default 60 s. */
  timeoutMs?: number;
  /** Idle time of a CONNECT tunnel before it is closed; default 15 min. */
  tunnelIdleMs?: number;
  /** The CA of TLS interception toward the hosts of secrets with `intercept_tls`. */
  ca: EgressCa;
  /** CA certificates (PEM) trusted for upstreams besides the public roots. */
  upstreamCa?: readonly string[];
}

/** Headers of one hop (RFC 9110 7.6.1) and the proxy's own: never forwarded. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const REDACTED = new Set(['authorization', 'cookie', 'set-cookie']);
const REALM = 'Basic realm="sandboxd egress proxy"';

/** A refusal before anything is forwarded. */
interface Refusal {
  status: number;
  reason: string;
  hook?: string;
}

type Route = { address: string; refusal?: undefined } | { refusal: Refusal };

/** What became of a request: the status the sandbox got and the bytes each way; `failed` when the upstream failed. */
export interface Outcome {
  status: number;
  bytes_in: number;
  bytes_out: number;
  failed?: boolean;
}

interface Caller {
  uuid: string;
  name: string;
  labels: Record<string, string>;
}

/**
 * The egress proxy: absolute-form HTTP requests and CONNECT tunnels from sandboxes (TLS is
 * terminated only toward the host and port of a sandbox's secret with `intercept_tls`, where
 * each request inside is then treated as an absolute-form one; every other tunnel is bytes), identified by their sandbox token in `Proxy-Authorization: Basic` (the password
 * of `http://sbx:<token>@<gateway>:<port>`). A destination passes the sandbox's rules (deny
 * list, then `proxy` egress's allow list; literal IPs only when an allow IP/CIDR names them;
 * addresses that are not public, the host's own and the sandbox networks' only when an allow
 * IP/CIDR names them), then the `on_request` hooks. Names are resolved here and the checked address is the
 * one connected to, so a DNS answer that changes in between (rebinding) cannot redirect it.
 */
export class EgressProxy implements ForwardProxy {
  private readonly agent = new Agent({ keepAlive: true, maxFreeSockets: 64 });
  private readonly tlsAgent: HttpsAgent;
  private readonly interceptor: TlsInterceptor;
  private readonly resolve: Resolver;
  private readonly timeoutMs: number;
  private readonly tunnelIdleMs: number;

  constructor(private readonly input: EgressProxyInput) {
    this.resolve = input.resolve ?? ((host) => lookup(host, { all: true, order: 'ipv4first' }));
    this.timeoutMs = input.timeoutMs ?? 60_000;
    this.tunnelIdleMs = input.tunnelIdleMs ?? 15 * 60_000;
    const extra = input.upstreamCa ?? [];
    this.tlsAgent = new HttpsAgent({ keepAlive: true, maxFreeSockets: 64, ...(extra.length > 0 ? { ca: [...rootCertificates, ...extra] } : {}) });
    this.interceptor = new TlsInterceptor({ ca: input.ca, idleMs: this.tunnelIdleMs, logger: input.logger });
  }

  close(): void {
    this.agent.destroy();
    this.tlsAgent.destroy();
    this.interceptor.close();
  }

  async request(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const started = performance.now();
    let target: URL;
    try {
      target = new URL(request.url ?? '');
    } catch {
      return plain(response, 400, `not a URL: ${String(request.url).slice(0, 200)}`);
    }
    if (target.protocol !== 'http:') return plain(response, 400, `the proxy forwards http:// URLs; for ${target.protocol}// open a tunnel with CONNECT`);
    const caller = await this.authenticate(request.headers['proxy-authorization']);
    if (typeof caller === 'string') return plain(response, 407, caller, { 'proxy-authenticate': REALM });
    await this.serve(caller, request, response, target, started);
  }

  /** One request to `target` (http://, or https:// inside an intercepted tunnel): decided, forwarded, logged. */
  private async serve(caller: Caller, request: IncomingMessage, response: ServerResponse, target: URL, started: number): Promise<void> {
    const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
    const method = request.method ?? 'GET';
    const facts = this.facts(caller, method, `${target.origin}${target.pathname}${target.search}`, target.hostname, port, target.pathname, request.headers);
    const route = await this.decide(caller, facts);
    if (route.refusal) {
      plain(response, route.refusal.status, route.refusal.reason);
      return this.done(facts, route.refusal, { status: route.refusal.status, bytes_in: 0, bytes_out: 0 }, started);
    }
    const outcome = await this.forward(request, response, caller, target, route.address, port);
    this.done(facts, undefined, outcome, started);
  }

  async connect(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const started = performance.now();
    const authority = /^(\[[0-9A-Fa-f:.]+\]|[^:/\s]+):(\d{1,5})$/.exec(request.url ?? '');
    const port = Number(authority?.[2] ?? 0);
    if (!authority?.[1] || port < 1 || port > 65535) return rawAnswer(socket, 400, `CONNECT needs host:port, not '${String(request.url).slice(0, 200)}'`);
    // As a URL of the same host would read it: `2130706433` and `127.1` are 127.0.0.1, not names.
    const host = canonicalHost(authority[1]);
    if (!host) return rawAnswer(socket, 400, `CONNECT names no valid host: '${authority[1].slice(0, 200)}'`);
    const caller = await this.authenticate(request.headers['proxy-authorization']);
    if (typeof caller === 'string') return rawAnswer(socket, 407, caller, [`Proxy-Authenticate: ${REALM}`]);
    const facts = this.facts(caller, 'CONNECT', `https://${host}:${port}`, host, port, '', {});
    const route = await this.decide(caller, facts);
    if (route.refusal) {
      rawAnswer(socket, route.refusal.status, route.refusal.reason);
      return this.done(facts, route.refusal, { status: route.refusal.status, bytes_in: 0, bytes_out: 0 }, started);
    }
    // A secret's host with intercept_tls: TLS ends here, each request inside is served as one.
    if (await this.input.secrets.intercepts(caller.uuid, host, port)) {
      const outcome = await this.interceptor.intercept(socket, head, host, (inner, answer) => {
        const path = inner.url ?? '/';
        if (!path.startsWith('/')) return Promise.resolve(plain(answer, 400, `inside a tunnel a request names a path, not '${path.slice(0, 200)}'`));
        return this.serve(caller, inner, answer, new URL(`https://${host}${port === 443 ? '' : `:${port}`}${path}`), performance.now());
      });
      return this.done(facts, undefined, outcome, started);
    }
    const outcome = await this.tunnel(socket, head, route.address, port);
    this.done(facts, undefined, outcome, started);
  }

  /** The sandbox of a Proxy-Authorization header, or why there is none (a 407). */
  private async authenticate(header: string | undefined): Promise<Caller | string> {
    if (!header) return 'proxy authentication required: use the proxy as http://sbx:<sandbox token>@<host>:<port> (HTTP_PROXY in the sandbox)';
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header.trim());
    const encoded = basic?.[1];
    const credentials = encoded ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    const token = credentials.slice(credentials.indexOf(':') + 1);
    const uuid = basic ? this.input.tokens.verify(token) : undefined;
    if (!uuid) return 'the proxy credentials are not a valid sandbox token';
    const sandbox = await this.input.sandboxes.byUuid(uuid);
    if (!sandbox) return 'the sandbox this token was made for no longer exists';
    return { uuid, name: sandbox.name, labels: sandbox.labels };
  }

  private facts(caller: Caller, method: string, url: string, host: string, port: number, path: string, headers: IncomingHttpHeaders): ProxyRequestFacts {
    const shown: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined || HOP_HEADERS.has(name)) continue;
      shown[name] = REDACTED.has(name) ? '[redacted]' : value;
    }
    return { timestamp: isoNow(this.input.clock), sandbox: caller.name, sandbox_uuid: caller.uuid, labels: caller.labels, method, url, host, port, path, headers: shown };
  }

  /** The address to connect to, or the refusal: the sandbox's rules first, then the hooks. */
  private async decide(caller: Caller, facts: ProxyRequestFacts): Promise<Route> {
    const route = await this.route(caller.uuid, facts.host, facts.port);
    if (route.refusal) return route;
    const verdict = await this.input.hooks.onRequest(facts);
    if (verdict.decision === 'deny') return { refusal: { status: verdict.status, reason: verdict.reason, hook: verdict.hook } };
    return route;
  }

  /**
   * The sandbox's destination rules for one host (as WHATWG reads it: `canonicalHost`) and port.
   * Addresses that are not public (`InternalAddresses`), literal or resolved, pass only where an
   * allow IP/CIDR names them (with this port, when the entry gives one).
   */
  async route(sandboxUuid: string, host: string, port: number): Promise<Route> {
    const deny = (reason: string): Route => ({ refusal: { status: 403, reason } });
    const egress = await this.input.egressOf(sandboxUuid);
    if (!egress) return deny('the sandbox this token was made for no longer exists');
    if (egress.egress === 'none') return deny("the sandbox's egress is none: it may reach nothing");
    const allow = destinationsOf(egress.allow);
    const denied = destinationsOf(egress.deny);
    const bare = plainAddress(unbracket(host)).toLowerCase();
    if (isIP(bare)) {
      if (denied.address(bare, port)) return deny(`${bare} is in the sandbox's deny list`);
      if (!allow.address(bare, port)) return deny(`${bare}:${port} is a literal IP address: those are refused unless an allow entry (an IP or CIDR, with this port if it names one) names them`);
      return { address: bare };
    }
    const name = bare.replace(/\.$/, '');
    if (denied.host(name, port)) return deny(`${name} is in the sandbox's deny list`);
    if (egress.egress === 'proxy' && !allow.host(name, port)) return deny(`${name} is not in the sandbox's allow list`);
    let addresses: { address: string }[];
    try {
      addresses = await this.resolve(name);
    } catch (err) {
      return { refusal: { status: 502, reason: `cannot resolve ${name}: ${(err as NodeJS.ErrnoException).code ?? 'lookup failed'}` } };
    }
    let first: string | undefined;
    for (const { address } of addresses) {
      const ip = plainAddress(address);
      const refused = denied.address(ip, port)
        ? 'in the deny list'
        : this.input.internal.has(ip) && !allow.address(ip, port)
          ? 'not a public address (private, CGNAT, unique local, loopback, link-local, a cloud-internal service, the host or a sandbox network)'
          : undefined;
      if (!refused) return { address: ip };
      first ??= `${name} resolves to ${ip}, ${refused}: refused unless an allow entry (an IP or CIDR) names it`;
    }
    return deny(first ?? `${name} has no address`);
  }

  /**
   * Forwards one request to the checked address and streams the answer back, with the values
   * of the secrets swapped in replaced by their placeholders again (headers and body). Over
   * https the upstream's certificate is verified for the request's host name.
   */
  private async forward(request: IncomingMessage, response: ServerResponse, caller: Caller, target: URL, address: string, port: number): Promise<Outcome> {
    const secure = target.protocol === 'https:';
    const headers = forwardHeaders(request.headers, target);
    const swapped = await this.input.secrets.swap(caller.uuid, { host: target.hostname, port, scheme: secure ? 'https' : 'http' }, headers);
    const counts: Outcome = { status: 0, bytes_in: 0, bytes_out: 0 };
    return new Promise((resolve) => {
      let settled = false;
      const finish = () => {
        if (!settled) {
          settled = true;
          resolve(counts);
        }
      };
      const name = unbracket(target.hostname);
      const options = { host: address, port, method: request.method, path: `${target.pathname}${target.search}`, headers: swapped.headers as OutgoingHttpHeaders, setHost: false, timeout: this.timeoutMs };
      const upstream = secure
        ? httpsRequest({ ...options, agent: this.tlsAgent, ...(isIP(name) ? {} : { servername: name }) })
        : httpRequest({ ...options, agent: this.agent });
      upstream.on('timeout', () => upstream.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
      upstream.on('response', (answer) => {
        counts.status = answer.statusCode ?? 502;
        relayAnswer(answer, response, withoutHops(answer.headers), swapped.scrub, {
          received: (bytes) => (counts.bytes_in += bytes),
          done: finish,
        });
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (!response.headersSent) {
          const timedOut = err.code === 'ETIMEDOUT';
          counts.status = timedOut ? 504 : 502;
          counts.failed = true;
          plain(response, counts.status, `the proxy could not ${timedOut ? 'get an answer from' : 'reach'} ${target.host}: ${err.code ?? err.message}`);
        } else response.destroy();
        finish();
      });
      response.on('close', () => {
        if (!response.writableFinished) upstream.destroy();
        finish();
      });
      request.on('data', (chunk: Buffer) => (counts.bytes_out += chunk.length));
      request.pipe(upstream);
    });
  }

  /** Opens a tunnel to the checked address and pipes both ways until either side ends. */
  private tunnel(socket: Duplex, head: Buffer, address: string, port: number): Promise<Outcome> {
    const counts: Outcome = { status: 0, bytes_in: 0, bytes_out: 0 };
    return new Promise((resolve) => {
      const upstream: Socket = netConnect({ host: address, port, timeout: this.timeoutMs });
      let open = false;
      const end = () => {
        upstream.destroy();
        socket.destroy();
        resolve(counts);
      };
      upstream.once('connect', () => {
        open = true;
        counts.status = 200;
        upstream.setTimeout(this.tunnelIdleMs);
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) {
          counts.bytes_out += head.length;
          upstream.write(head);
        }
        upstream.on('data', (chunk: Buffer) => (counts.bytes_in += chunk.length));
        socket.on('data', (chunk: Buffer) => (counts.bytes_out += chunk.length));
        upstream.pipe(socket);
        socket.pipe(upstream);
      });
      upstream.on('timeout', () => {
        if (!open) {
          counts.status = 504;
          counts.failed = true;
          rawAnswer(socket, 504, `no connection to ${address}:${port} within ${this.timeoutMs} ms`);
        }
        end();
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (!open) {
          counts.status = 502;
          counts.failed = true;
          rawAnswer(socket, 502, `the proxy could not reach ${address}:${port}: ${err.code ?? err.message}`);
        }
        end();
      });
      upstream.on('close', end);
      socket.on('close', end);
      socket.on('error', end);
    });
  }

  /** Logs, counts, publishes and tells the on_response hooks. */
  private done(facts: ProxyRequestFacts, refusal: Refusal | undefined, outcome: Outcome, started: number): void {
    const latency_ms = Math.round((performance.now() - started) * 100) / 100;
    const decision = refusal ? 'deny' : 'allow';
    const reason = refusal?.reason ?? 'allowed';
    // `error`: allowed, but the upstream could not be reached or did not answer in time.
    this.input.decisions.inc({ decision: refusal ? 'deny' : outcome.failed ? 'error' : 'allow' });
    // After the answer, off its path: a log the store could not keep is a line in the server's log.
    void this.input.log.add({
      timestamp: facts.timestamp,
      sandbox: facts.sandbox,
      sandbox_uuid: facts.sandbox_uuid,
      method: facts.method,
      url: facts.url,
      host: facts.host,
      port: facts.port,
      decision,
      reason,
      ...(refusal?.hook ? { hook: refusal.hook } : {}),
      status: outcome.status,
      bytes_in: outcome.bytes_in,
      bytes_out: outcome.bytes_out,
      latency_ms,
    }).catch((err: unknown) => this.input.logger.error({ err, sandbox: facts.sandbox }, 'a decision of the egress proxy was not logged'));
    if (refusal) this.input.denied(facts, refusal.reason);
    void this.input.hooks
      .onResponse(facts, { status: outcome.status, bytes_in: outcome.bytes_in, bytes_out: outcome.bytes_out, latency_ms, decision })
      .catch((err: unknown) => this.input.logger.error({ err, sandbox: facts.sandbox }, 'the on_response proxy hooks could not be read'));
  }
}

/** Headers without those of one hop (and those its Connection header names). */
function withoutHops(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim()).filter(Boolean));
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_HEADERS.has(name) && !named.has(name)) out[name] = value;
  }
  return out;
}

/** The request's headers for the next hop: its Host, and URL userinfo as basic auth. */
function forwardHeaders(headers: IncomingHttpHeaders, target: URL): IncomingHttpHeaders {
  const out = withoutHops(headers);
  out.host = target.host;
  if ((target.username || target.password) && !out.authorization) {
    out.authorization = `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64')}`;
  }
  return out;
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 407: 'Proxy Authentication Required', 502: 'Bad Gateway', 504: 'Gateway Timeout' };

export function plain(response: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  const body = `${message}\n`;
  response.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

/** An answer written on a CONNECT socket (no tunnel), which is then closed. */
export function rawAnswer(socket: Duplex, status: number, message: string, extra: string[] = []): void {
  const body = `${message}\n`;
  const head = [`HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}`, ...extra, 'Content-Type: text/plain; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}
