import { readFileSync } from 'node:fs';
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
import type { AuditApi } from '../events/api.js';
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
import type { SandboxNetwork } from '../../domain/egress.js';
import type { Profile } from '../../domain/profiles.js';
import { egressLookup, sandboxEgress } from '../sandboxes/sandbox-network.js';
import type { EgressSettings } from './egress-settings.js';
import { EgressCa } from './egress-ca.js';
import { CA_ENV, installCaTrust } from './sandbox-trust.js';

export type { EgressSettings } from './egress-settings.js';

/** The proxy port cannot listen; the message says what to fix (at start it ends the process, exit 2). */
export class ProxyStartError extends Error {
  override readonly name = 'ProxyStartError';
}


/** How long a `proxy.denied` event stands for the same sandbox and host (no flood from a retrying client). */
const DENIED_EVENT_EVERY_MS = 10_000;

/** What the env of a sandbox's commands is made from. */
export interface SandboxIdentity {
  uuid: string;
  profile: Profile;
  /** The sandbox's `network` (absent or null: its profile's default). */
  network?: SandboxNetwork | null;
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
  readonly proxyLog: ProxyLog;
  /** Sandbox secrets and their swap. */
  readonly secrets: SandboxSecrets;
  /** The CA of TLS interception toward secret hosts (made on first use). */
  readonly ca: EgressCa;
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
      audit: AuditApi;
      secrets: SecretBox;
      /** A sandbox's egress rules, read per request; default its record's `network` field. */
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
      streamUsage: input.settings.streamUsage,
    });
    this.server.mount('/llm/', (request, response, path) => this.gateway.handle(request, response, path));
    this.hooks = new ProxyHooks({ repo: input.proxy, audit: input.audit, clock: input.clock, logger: input.logger, audited: (facts, hook, outcome) => this.publish('proxy.audited', facts, { hook, ...outcome }) });
    this.secrets = new SandboxSecrets({ repo: input.proxy, box: input.secrets });
    this.proxyLog = new ProxyLog(input.proxy);
    this.ca = new EgressCa({ repo: input.proxy, box: input.secrets, clock: input.clock });
    this.proxy = new EgressProxy({
      ca: this.ca,
      upstreamCa: upstreamCaOf(input.settings),
      tokens: this.tokens,
      egressOf: input.egressOf ?? input.settings.egressOf ?? egressLookup(input.sandboxes),
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

  /** The proxy port's base URL while it listens (`http://<gateway>:<port>`), as `open` sandboxes reach it. */
  get url(): string | undefined {
    return this.urlFor('open');
  }

  /** The proxy port's base URL on the network of sandboxes with this egress. */
  urlFor(egress: 'open' | 'proxy'): string | undefined {
    const all = this.server.addresses;
    const bound = (egress === 'proxy' ? all[1] : undefined) ?? all[0];
    if (!bound) return undefined;
    return `http://${bound.host.includes(':') ? `[${bound.host}]` : bound.host}:${bound.port}`;
  }

  /**
   * Listens on the proxy port when enabled, on the gateway of each network of the backend's
   * sandboxes (`open`, and `proxy` where the backend offers it), and opens that port to them in
   * the backend's packet filter; ProxyStartError (or BACKEND_UNAVAILABLE from the engine) when
   * it cannot. Without the proxy the backend's networks are still made and closed at start.
   */
  async start(): Promise<void> {
    const { settings, backend } = this.input;
    if (!settings.enabled) return this.prepareNetworks();
    if (this.server.address) return;
    const hosts = settings.host !== undefined ? [settings.host] : await this.gatewayHosts();
    try {
      await this.server.listen(hosts, settings.port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') throw new ProxyStartError(`proxy port ${settings.port} on ${hosts.join(', ')} is in use: choose another with --proxy-port`);
      if (code === 'EADDRNOTAVAIL') throw new ProxyStartError(`the proxy port cannot listen on ${hosts.join(', ')}: this host has no such address (is the Docker bridge up?)`);
      throw err;
    }
    if (settings.host === undefined) await backend.capabilities.egress?.exposePort(this.server.addresses[0]?.port);
    this.input.logger.info({ url: this.url }, 'proxy port listening (LLM gateway at /llm/<provider>/)');
  }

  /** The gateway address of each network of the backend's sandboxes, where the proxy port listens. */
  private async gatewayHosts(): Promise<string[]> {
    const { backend } = this.input;
    const gateway = backend.capabilities.gateway;
    if (!gateway) throw new ProxyStartError(`--proxy: the ${backend.name} backend has no address its sandboxes reach the host at, so the proxy port cannot serve them`);
    try {
      const open = await gateway.gatewayAddress('open');
      const proxy = backend.capabilities.egress?.modes.includes('proxy') ? await gateway.gatewayAddress('proxy') : open;
      return proxy === open ? [open] : [open, proxy];
    } catch (err) {
      if (!isServiceError(err)) throw err;
      throw new ProxyStartError(`--proxy: cannot learn the address sandboxes reach the host at: ${err.message}`);
    }
  }

  /** Makes the backend's networks and packet filter now rather than at the first create (a failure is logged: creates say it again). */
  private async prepareNetworks(): Promise<void> {
    await this.input.backend.capabilities.egress?.exposePort(undefined).catch((err: unknown) => {
      this.input.logger.error({ err }, "sandboxd's networks or packet filter are not ready; networked sandboxes cannot be made until they are");
    });
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
   * The variables a sandbox's commands get while the proxy port listens: the egress proxy
   * (`HTTP_PROXY` and friends on the gateway of the sandbox's network, its token as the
   * password), each provider's base URL on that gateway and, as its key, the same token (a
   * placeholder the gateway swaps for the real key). None for a sandbox without a network.
   */
  async sandboxEnv(sandbox: SandboxIdentity): Promise<Record<string, string>> {
    const egress = sandboxEgress({ profile: sandbox.profile, network: sandbox.network ?? null }).egress;
    if (egress === 'none') return {};
    const base = this.urlFor(egress);
    if (!base) return {};
    const token = this.tokens.mint(sandbox.uuid);
    const env = proxyEnv(base, token);
    // A sandbox whose secrets are swapped in HTTPS trusts the proxy's CA (installCa put it there).
    if (await this.secrets.intercepting(sandbox.uuid)) Object.assign(env, CA_ENV);
    for (const provider of await this.keys.providers()) {
      for (const name of provider.env.baseUrl) env[name] = `${base}/llm/${provider.name}${provider.env.baseUrlSuffix}`;
      for (const name of provider.env.keys) env[name] = token;
    }
    return env;
  }

  /**
   * Makes a sandbox's system trust store (and the files of CA_ENV) trust the proxy's CA, when
   * it has a secret with `intercept_tls`; a failure is logged (its HTTPS requests to the
   * secret's host then fail verification, they never go out unchecked).
   */
  async installCa(sandbox: SandboxIdentity & { name: string }, backendId: string | null): Promise<void> {
    if (!backendId || !(await this.secrets.intercepting(sandbox.uuid))) return;
    // A sandbox without a network never reaches the proxy: nothing to trust.
    if (sandboxEgress({ profile: sandbox.profile, network: sandbox.network ?? null }).egress === 'none') return;
    const problem = await installCaTrust(this.input.backend, backendId, await this.ca.certificatePem());
    if (problem) this.input.logger.error({ sandbox: sandbox.name, problem }, "the sandbox could not be made to trust the egress proxy's CA: its HTTPS requests to secret hosts will fail verification");
  }

  /** Sets (or with undefined, clears) a sandbox's LLM token budget. */
  async setBudget(sandboxUuid: string, budgetTokens: number | undefined): Promise<void> {
    if (budgetTokens === undefined) await this.llmRepo.deleteBudget(sandboxUuid);
    else await this.llmRepo.setBudget(sandboxUuid, budgetTokens);
  }
}

/** The CA certificates (PEM) trusted for upstreams besides the public roots: the settings' own and those of `upstreamCaFile`. */
function upstreamCaOf(settings: EgressSettings): string[] {
  const pems = [...(settings.upstreamCa ?? [])];
  if (settings.upstreamCaFile) {
    try {
      pems.push(readFileSync(settings.upstreamCaFile, 'utf8'));
    } catch (err) {
      throw new ProxyStartError(`--proxy-upstream-ca-file: cannot read ${settings.upstreamCaFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    if (!pems.at(-1)?.includes('-----BEGIN CERTIFICATE-----')) throw new ProxyStartError(`--proxy-upstream-ca-file: ${settings.upstreamCaFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  return pems;
}

/**
 * The proxy variables (DECISIONS-WAVE2 5.4, "which sandboxes"): the proxy on the gateway, the
 * sandbox's token as the userinfo its clients send as Proxy-Authorization; the gateway itself
 * (the LLM base URLs) is reached directly.
 */
function proxyEnv(base: string, token: string): Record<string, string> {
  const url = new URL(base);
  const proxy = `${url.protocol}//sbx:${token}@${url.host}`;
  const noProxy = `localhost,127.0.0.1,${url.hostname}`;
  return { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy, NO_PROXY: noProxy, no_proxy: noProxy };
}
