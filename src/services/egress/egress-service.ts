import type { Backend } from '../../backends/backend.js';
import { isServiceError } from '../../errors.js';
import type { LlmRepository } from '../../state/llm-repository.js';
import type { SandboxRepository } from '../../state/sandbox-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { EventBus } from '../events/event-bus.js';
import { isoNow, type Clock } from '../support/clock.js';
import type { SecretBox } from '../support/secret-box.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { AuditService } from '../events/audit-service.js';
import { EgressProxy, type EgressLookup, type Resolver } from './egress-proxy.js';
import { InternalAddresses } from './internal-addresses.js';
import { LlmGateway } from './llm-gateway.js';
import { ProxyHooks, type ProxyOutcome, type ProxyRequestFacts } from './proxy-hooks.js';
import { ProxyLog } from './proxy-log.js';
import { SandboxSecrets } from './sandbox-secrets.js';
import { LlmKeys } from './llm-keys.js';
import { providersFrom, type ProviderSettings } from './llm-providers.js';
import { LlmUsage } from './llm-usage.js';
import { ProxyServer } from './proxy-server.js';
import { SandboxTokens } from './sandbox-token.js';

/** The proxy port cannot listen; the message says what to fix (at start it ends the process, exit 2). */
export class ProxyStartError extends Error {
  override readonly name = 'ProxyStartError';
}

/** `[proxy]` and `[llm]` settings. */
export interface EgressSettings {
  /** Listen on the proxy port at start (`--proxy`). */
  enabled: boolean;
  /** The proxy port (`--proxy-port`); 0 picks a free one (tests). */
  port: number;
  /**
   * Where to listen instead of the backend's gateway address (tests bind 127.0.0.1). Sandboxes
   * are told this address, so it must be one they reach.
   */
  host?: string;
  /** `[llm.providers.<name>]`. */
  providers?: Record<string, ProviderSettings>;
  /** `[llm].stream_usage`: ask OpenAI Chat streams for their usage; default true. */
  streamUsage?: boolean;
  /** Host names to addresses for the egress proxy (tests map names to local upstreams); default DNS. */
  resolve?: Resolver;
  /** CIDRs of the sandbox networks the proxy refuses; default the host's Docker bridges' ranges. */
  sandboxRanges?: () => readonly string[];
  /** Sandboxes' egress rules (tests); see the `egressOf` input. */
  egressOf?: EgressLookup;
  /** Idle time of a forwarded request before 504 (tests); default 60 s. */
  proxyTimeoutMs?: number;
}

/** How long a `proxy.denied` event stands for the same sandbox and host (no flood from a retrying client). */
const DENIED_EVENT_EVERY_MS = 10_000;

/** What the env of a sandbox's commands is made from. */
export interface SandboxIdentity {
  uuid: string;
  profile: string;
}

/**
 * What sandboxes use of the server over the network: the proxy port, the LLM gateway served on
 * it, the provider keys behind it and the usage it counts. The runtime calls `start` after
 * recovery and `close` at shutdown; `sandboxEnv` is merged into the env of every command.
 */
export class EgressService {
  readonly tokens: SandboxTokens;
  readonly keys: LlmKeys;
  readonly usage: LlmUsage;
  /** Hooks of the egress proxy (persisted). */
  readonly hooks: ProxyHooks;
  /** Recent decisions of the egress proxy. */
  readonly proxyLog = new ProxyLog();
  /** Sandbox secrets and their swap. */
  readonly secrets: SandboxSecrets;
  private readonly proxy: EgressProxy;
  private readonly deniedAt = new Map<string, number>();
  private readonly server: ProxyServer;
  private readonly gateway: LlmGateway;
  private readonly llmRepo: LlmRepository;

  constructor(
    private readonly input: {
      settings: EgressSettings;
      backend: Backend;
      sandboxes: SandboxRepository;
      llm: LlmRepository;
      proxy: ProxyRepository;
      audit: AuditService;
      secrets: SecretBox;
      /**
       * A sandbox's egress rules, read per request. TODO(lead): the `net` branch's lookup of the
       * sandbox `network` field; until then `egressFromRecord` (open, or none for restrictive).
       */
      egressOf?: EgressLookup;
      bus: EventBus;
      metrics: Metrics;
      clock: Clock;
      logger: Logger;
      env?: NodeJS.ProcessEnv;
    },
  ) {
    this.llmRepo = input.llm;
    this.tokens = new SandboxTokens(input.secrets);
    this.keys = new LlmKeys({ repo: input.llm, secrets: input.secrets, clock: input.clock, providers: providersFrom(input.settings.providers), ...(input.env ? { env: input.env } : {}) });
    this.usage = new LlmUsage({ repo: input.llm, clock: input.clock });
    this.server = new ProxyServer(input.logger);
    this.gateway = new LlmGateway({
      keys: this.keys,
      tokens: this.tokens,
      sandboxes: input.sandboxes,
      usage: input.llm,
      bus: input.bus,
      clock: input.clock,
      logger: input.logger,
      tokensCounter: input.metrics.llmTokens,
      streamUsage: input.settings.streamUsage ?? true,
    });
    this.server.mount('/llm/', (request, response, path) => this.gateway.handle(request, response, path));
    this.hooks = new ProxyHooks({ repo: input.proxy, audit: input.audit, clock: input.clock, logger: input.logger, audited: (facts, hook, outcome) => this.publish('proxy.audited', facts, { hook, ...outcome }) });
    this.secrets = new SandboxSecrets({ repo: input.proxy, box: input.secrets });
    this.proxy = new EgressProxy({
      tokens: this.tokens,
      egressOf: input.egressOf ?? input.settings.egressOf ?? (async (uuid) => egressFromRecord(await input.sandboxes.byUuid(uuid))),
      sandboxes: input.sandboxes,
      hooks: this.hooks,
      secrets: this.secrets,
      log: this.proxyLog,
      internal: new InternalAddresses(input.settings.sandboxRanges),
      decisions: input.metrics.proxyRequests,
      denied: (facts, reason) => this.publishDenied(facts, reason),
      clock: input.clock,
      logger: input.logger,
      ...(input.settings.resolve ? { resolve: input.settings.resolve } : {}),
      ...(input.settings.proxyTimeoutMs ? { timeoutMs: input.settings.proxyTimeoutMs } : {}),
    });
    this.server.mountForward(this.proxy);
  }

  /** The proxy port's base URL while it listens (`http://<gateway>:<port>`). */
  get url(): string | undefined {
    const bound = this.server.address;
    if (!bound) return undefined;
    return `http://${bound.host.includes(':') ? `[${bound.host}]` : bound.host}:${bound.port}`;
  }

  /** Listens on the proxy port when enabled; ProxyStartError (or BACKEND_UNAVAILABLE from the engine) when it cannot. */
  async start(): Promise<void> {
    const { settings, backend } = this.input;
    if (!settings.enabled || this.server.address) return;
    let host = settings.host;
    if (host === undefined) {
      const gateway = backend.capabilities.gateway;
      if (!gateway) throw new ProxyStartError(`--proxy: the ${backend.name} backend has no address its sandboxes reach the host at, so the proxy port cannot serve them`);
      try {
        host = await gateway.gatewayAddress();
      } catch (err) {
        if (!isServiceError(err)) throw err;
        throw new ProxyStartError(`--proxy: cannot learn the address sandboxes reach the host at: ${err.message}`);
      }
    }
    try {
      await this.server.listen(host, settings.port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') throw new ProxyStartError(`proxy port ${settings.port} on ${host} is in use: choose another with --proxy-port`);
      if (code === 'EADDRNOTAVAIL') throw new ProxyStartError(`the proxy port cannot listen on ${host}: this host has no such address (is the Docker bridge up?)`);
      throw err;
    }
    this.input.logger.info({ url: this.url }, 'proxy port listening (LLM gateway at /llm/<provider>/)');
  }

  async close(): Promise<void> {
    await this.server.close();
    this.gateway.close();
    this.proxy.close();
  }

  /** `proxy.denied`, at most once per DENIED_EVENT_EVERY_MS for a sandbox and host. */
  private publishDenied(facts: ProxyRequestFacts, reason: string): void {
    const key = `${facts.sandbox_uuid} ${facts.host}`;
    const now = Date.now();
    if ((this.deniedAt.get(key) ?? 0) > now - DENIED_EVENT_EVERY_MS) return;
    if (this.deniedAt.size > 10_000) this.deniedAt.clear();
    this.deniedAt.set(key, now);
    this.publish('proxy.denied', facts, { reason });
  }

  private publish(type: 'proxy.denied' | 'proxy.audited', facts: ProxyRequestFacts, extra: Partial<ProxyOutcome> & Record<string, unknown>): void {
    this.input.bus.publish({
      type,
      timestamp: isoNow(this.input.clock),
      sandbox: facts.sandbox,
      sandbox_uuid: facts.sandbox_uuid,
      labels: facts.labels,
      metadata: { method: facts.method, url: facts.url, host: facts.host, port: facts.port, ...extra },
    });
  }

  /**
   * The variables a sandbox's commands get while the proxy port listens: each provider's base
   * URL on the gateway and, as its key, the sandbox's token (a placeholder the gateway swaps for
   * the real key). None for a restrictive sandbox, which has no network to reach the port with.
   */
  async sandboxEnv(sandbox: SandboxIdentity): Promise<Record<string, string>> {
    const base = this.url;
    if (!base || sandbox.profile === 'restrictive') return {};
    const token = this.tokens.mint(sandbox.uuid);
    const env: Record<string, string> = {};
    for (const provider of await this.keys.providers()) {
      for (const name of provider.env.baseUrl) env[name] = `${base}/llm/${provider.name}${provider.env.baseUrlSuffix}`;
      for (const name of provider.env.keys) env[name] = token;
    }
    return env;
  }

  /**
   * The variables that send a sandbox's HTTP clients through the egress proxy while the port
   * listens: `HTTP_PROXY` and friends carry its token as the password. TODO(lead): merged into
   * the exec env by the `net` branch (with NO_PROXY naming the gateway, so LLM base URLs are
   * reached directly).
   */
  proxyVariables(sandboxUuid: string): Record<string, string> {
    const bound = this.server.address;
    if (!bound) return {};
    const host = bound.host.includes(':') ? `[${bound.host}]` : bound.host;
    const url = `http://sbx:${this.tokens.mint(sandboxUuid)}@${host}:${bound.port}`;
    return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url };
  }

  /** Sets (or with undefined, clears) a sandbox's LLM token budget. */
  async setBudget(sandboxUuid: string, budgetTokens: number | undefined): Promise<void> {
    if (budgetTokens === undefined) await this.llmRepo.deleteBudget(sandboxUuid);
    else await this.llmRepo.setBudget(sandboxUuid, budgetTokens);
  }
}

/**
 * A sandbox's egress from its record while the sandbox `network` field is not there:
 * restrictive sandboxes reach nothing, others are `open` (the proxy still refuses the host's,
 * the sandboxes', loopback and link-local addresses). TODO(lead): replace with the `net` branch's lookup.
 */
export function egressFromRecord(record: Pick<SandboxRecord, 'profile'> | undefined): { egress: 'open' | 'none'; allow: string[]; deny: string[] } | undefined {
  if (!record) return undefined;
  return { egress: record.profile === 'restrictive' ? 'none' : 'open', allow: [], deny: [] };
}
