/** What sandboxes use of the server over the network: the proxy port and the LLM gateway on it. */
export { EgressService, ProxyStartError, type EgressSettings } from './egress-service.js';
