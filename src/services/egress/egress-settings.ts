import type { EgressLookup, Resolver } from './egress-proxy.js';
import type { ProviderSettings } from './llm-providers.js';

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
  providers: Record<string, ProviderSettings>;
  /** `[llm].stream_usage`: ask OpenAI Chat streams for their usage. */
  streamUsage: boolean;
  /** Host names to addresses for the egress proxy (tests map names to local upstreams); default DNS. */
  resolve?: Resolver;
  /** CIDRs of the sandbox networks the proxy refuses; default the host's Docker bridges' ranges. */
  sandboxRanges?: () => readonly string[];
  /** Sandboxes' egress rules (tests); see the `egressOf` input. */
  egressOf?: EgressLookup;
  /** Idle time of a forwarded request before 504 (tests); default 60 s. */
  proxyTimeoutMs?: number;
  /** `--proxy-upstream-ca-file`: a PEM file of CA certificates trusted for upstreams besides the public roots. */
  upstreamCaFile?: string;
  /** CA certificates (PEM) trusted for upstreams besides the public roots (tests). */
  upstreamCa?: readonly string[];
}
