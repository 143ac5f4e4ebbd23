import { z } from 'zod';
import { timestamp } from './common.js';

export const health = z.object({ status: z.string(), success: z.boolean(), data: z.string() });

/** The optional features a backend may offer; the routes of one it lacks answer 422 UNSUPPORTED. */
export const BACKEND_CAPABILITIES = ['snapshots', 'archive', 'resize', 'pool_claim', 'detached', 'browser_relay', 'reuse', 'workers', 'disk_quota', 'gateway', 'terminal', 'egress', 'file_views', 'file_archives', 'volumes', 'ports', 'image_build'] as const;
export type BackendCapability = (typeof BACKEND_CAPABILITIES)[number];

export const serverStatus = z
  .object({
    version: z.string(),
    backend: z.string(),
    api_key_configured: z.boolean(),
    events_enabled: z
      .boolean()
      .meta({ description: 'Whether GET /events streams: the server runs with --events, --webhook-url or --otel-endpoint (otherwise GET /events answers 503)' }),
    capabilities: z.array(z.enum(BACKEND_CAPABILITIES)).meta({ description: "The optional features of the server's backend" }),
  })
  .meta({ id: 'ServerStatus' });

export const serverStats = z
  .object({
    sandbox_count: z.int(),
    sandbox_limit: z.int().meta({ description: 'Most sandboxes that may exist at once; 0 = unlimited' }),
    backend: z.string(),
    uptime_seconds: z.int(),
    version: z.string(),
    resource_usage: z.object({
      cpu_percent: z.number(),
      memory_used_mb: z.int(),
      memory_total_mb: z.int(),
      disk_used_mb: z.int(),
      disk_total_mb: z.int(),
    }),
  })
  .meta({ id: 'ServerStats' });

export const auditEntry = z
  .looseObject({ timestamp, event: z.string(), sandbox: z.string() })
  .meta({ id: 'AuditEntry' });
