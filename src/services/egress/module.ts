import { llmRouteActions, llmRoutes } from '../../http/routes/llm-routes.js';
import { proxyRouteActions, proxyRoutes } from '../../http/routes/proxy-routes.js';
import { llmTools } from '../../mcp/tools/llm-tools.js';
import { proxyTools } from '../../mcp/tools/proxy-tools.js';
import { migration as proxyDecisions } from '../../state/migrations/0024-proxy-decisions.js';
import type { DomainModule } from '../domain-module.js';
import { EgressService } from './egress-service.js';
import type { EgressSettings } from './egress-settings.js';

declare module '../context.js' {
  interface ServiceInputs {
    /** Egress settings beyond the config's (a name resolver, sandboxes' egress rules, a listen address). */
    egress?: Partial<EgressSettings>;
  }
  interface ServiceParts {
    /** The proxy port and what it serves sandboxes: the LLM gateway, its keys and usage. */
    egress: EgressService;
  }
}

/** Egress: the proxy port, its hooks and log, sandbox secrets and the LLM gateway. */
export const egressModule = {
  name: 'egress',
  wire(ctx) {
    const { config, sandboxes } = ctx;
    const egress = new EgressService({
      ...ctx,
      logger: ctx.logger.child({ part: 'egress' }),
      settings: {
        enabled: config.proxy,
        port: config.proxyPort,
        providers: config.llmProviders,
        streamUsage: config.llmStreamUsage,
        ...(config.proxyUpstreamCaFile ? { upstreamCaFile: config.proxyUpstreamCaFile } : {}),
        ...ctx.inputs.egress,
      },
      sandboxes: ctx.repos.sandboxes,
      llm: ctx.repos.llm,
      proxy: ctx.repos.proxy,
    });
    sandboxes.onCreated(async (sandbox, input) => {
      if (input.llm_budget_tokens !== undefined) await egress.setBudget(sandbox.uuid, input.llm_budget_tokens);
      if (!input.secrets) return;
      await egress.secrets.save(sandbox.uuid, input.secrets, sandbox.env);
      // The container runs by now (made, or claimed from the pool): its trust store gets the CA.
      await egress.installCa(sandbox, sandbox.backend_id ?? (await ctx.repos.sandboxes.byUuid(sandbox.uuid))?.backend_id ?? null);
    });
    sandboxes.onRemoved(async (sandbox) => {
      await egress.setBudget(sandbox.uuid, undefined);
      await egress.secrets.remove(sandbox.uuid);
    });
    sandboxes.proxyListening = () => egress.url !== undefined;
    return { egress };
  },
  migrations: { '0024_proxy_decisions': proxyDecisions },
  routes: [llmRoutes, proxyRoutes],
  routeActions: { ...llmRouteActions, ...proxyRouteActions },
  tools: [...llmTools, ...proxyTools],
  close: ({ egress }) => egress.close(),
  eventKinds: ['llm.budget_exceeded', 'proxy.denied', 'proxy.audited', 'proxy.hook.created', 'proxy.hook.deleted'],
  metrics: ['sandboxd_llm_tokens_total', 'sandboxd_proxy_requests_total'],
} satisfies DomainModule;
