import type { SandboxEvent } from '../../src/services/events/event-bus.js';
import type { EgressSettings } from '../../src/services/egress/index.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { fakeHarness, type FakeHarness } from './fake-app.js';
import { FakeLlmUpstream } from './fake-llm-upstream.js';

/** Real keys the tests store; none may appear anywhere but in the requests to the fake upstream. */
export const REAL_KEYS = { openai: 'sk-real-OPENAI-4f9a1c', anthropic: 'sk-ant-real-ANTHROPIC-77e2', google: 'AIza-real-GOOGLE-0b3d' } as const;

export interface LlmHarness {
  h: FakeHarness;
  upstream: FakeLlmUpstream;
  /** The gateway's base URL (`http://127.0.0.1:<port>`). */
  gateway: string;
  events: SandboxEvent[];
  logLines: string[];
  close(): Promise<void>;
}

/**
 * The whole service over the fake backend with the proxy port on 127.0.0.1 and every built-in
 * provider's key stored, each provider pointed at one local fake upstream.
 */
export async function llmHarness(egress: Partial<EgressSettings> = {}): Promise<LlmHarness> {
  const upstream = new FakeLlmUpstream();
  const upstreamUrl = await upstream.start();
  const logLines: string[] = [];
  const logger = createLogger('debug', { write: (line: string) => void logLines.push(line) });
  const h = await fakeHarness({ egress: { enabled: true, port: 0, host: '127.0.0.1', ...egress } }, undefined, { enabled: true, backlog: 1000, webhookUrls: [] }, { logger });
  const events: SandboxEvent[] = [];
  h.services.observability.bus.subscribe(({ event }) => void events.push(event));
  await h.services.egress.start();
  for (const [provider, value] of Object.entries(REAL_KEYS)) {
    const response = await h.app.inject({ method: 'PUT', url: `/llm/keys/${provider}`, payload: { value, base_url: upstreamUrl } });
    if (response.statusCode !== 200) throw new Error(`PUT /llm/keys/${provider}: ${response.body}`);
  }
  return {
    h,
    upstream,
    gateway: h.services.egress.url!,
    events,
    logLines,
    async close() {
      await h.close();
      await upstream.close();
    },
  };
}
