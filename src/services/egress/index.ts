/** What sandboxes use of the server over the network: the proxy port and the LLM gateway on it. */
export { EgressService, ProxyStartError, type EgressSettings, type SandboxIdentity } from './egress-service.js';
export { SandboxTokens } from './sandbox-token.js';
export type { LlmKeyView, PutKeyInput } from './llm-keys.js';
export type { UsageQuery } from './llm-usage.js';
export type { ProviderSettings } from './llm-providers.js';
