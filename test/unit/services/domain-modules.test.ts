import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../../src/schemas/event-schemas.js';
import { DOMAINS } from '../../../src/services/domains.js';
import { Metrics } from '../../../src/telemetry/metrics.js';

/** The series of the server itself, not of a domain: requests, the backend, the process. */
const CORE_METRICS = [
  'sandboxd_http_requests_total',
  'sandboxd_http_request_duration_seconds',
  'sandboxd_backend_operation_duration_seconds',
  'sandboxd_timer_failures_total',
  'sandboxd_uncaught_errors_total',
  'sandboxd_build_info',
];

/** Each item of `lists` by the names of the lists that hold it. */
function owners(lists: [string, readonly string[]][]): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const [owner, items] of lists) for (const item of items) found.set(item, [...(found.get(item) ?? []), owner]);
  return found;
}

describe('domain modules (src/services/domains.ts)', () => {
  it('have distinct names', () => {
    const names = DOMAINS.map((domain) => domain.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('own every event kind, each kind once', () => {
    const byKind = owners(DOMAINS.map((domain) => [domain.name, domain.eventKinds ?? []]));
    expect([...byKind.keys()].sort()).toEqual([...EVENT_TYPES].sort());
    expect([...byKind].filter(([, names]) => names.length > 1)).toEqual([]);
  });

  it('own every metric series but the core ones, each series once', async () => {
    const metrics = new Metrics(
      { activeSandboxes: async () => 0, warmPoolSize: () => 0, eventClients: () => 0, webhookQueue: () => ({ queued: 0, inFlight: 0 }), activeObjects: async () => 0 },
      { version: 'test', backend: 'fake' },
    );
    const registered = (await metrics.registry.getMetricsAsJSON()).map((metric) => metric.name);
    const bySeries = owners([['core', CORE_METRICS], ...DOMAINS.map((domain): [string, readonly string[]] => [domain.name, domain.metrics ?? []])]);
    expect([...bySeries.keys()].sort()).toEqual([...registered].sort());
    expect([...bySeries].filter(([, names]) => names.length > 1)).toEqual([]);
  });

  it('register their routes and tools once each', () => {
    const routes = DOMAINS.flatMap((domain) => domain.routes ?? []);
    const tools = DOMAINS.flatMap((domain) => domain.tools ?? []).map((tool) => tool.name);
    expect(new Set(routes).size).toBe(routes.length);
    expect(new Set(tools).size).toBe(tools.length);
  });
});
