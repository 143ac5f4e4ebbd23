import { z } from 'zod';
import { proxyLogQuery } from '../../schemas/proxy-schemas.js';
import { defineTool, json, type Tool } from '../tool.js';

/** The egress proxy's recent decisions (hooks are set over HTTP by an administrator). */
export const proxyTools: Tool[] = [
  defineTool({
    name: 'proxy_log',
    title: 'Egress proxy decisions',
    description:
      "Recent requests of sandboxes through the egress proxy, newest first, as a JSON array of {timestamp, sandbox, method, url, " +
      'host, port, decision (allow|deny), reason, hook?, status, bytes_in, bytes_out, latency_ms}: why a request from a sandbox ' +
      'was refused (not in its allow list, a literal IP, a hook). Optionally of one sandbox; limit default 100.',
    inputSchema: z.strictObject(proxyLogQuery.shape),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ sandbox, limit }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: '/proxy/log', query: { limit: String(limit), ...(sandbox ? { sandbox } : {}) } }, signal)),
  }),
];
