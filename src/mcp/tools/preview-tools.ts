import { z } from 'zod';
import { duration } from '../../schemas/common.js';
import type { PreviewUrl } from '../../schemas/preview-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, requiring, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';

/** Preview URLs: a browser-openable address of a server an assistant started in a sandbox. */
export const previewTools: Tool[] = requiring('ports', [
  defineTool({
    name: 'sandbox_port_url',
    title: 'Get a shareable URL of a port in a sandbox',
    description:
      'Mint a signed URL that opens a server listening on a TCP port inside a running sandbox (a dev server, a web app, ' +
      'an API) from a browser, without the API key, until it expires. Servers bound to 127.0.0.1 inside the sandbox are ' +
      'reached too. Returns url (its own host name <port>-<sandbox>.<preview domain>, best for web apps), path_url ' +
      '(under the API address, for clients that cannot resolve that host name) and expires_at.',
    inputSchema: z.strictObject({
      name: sandboxName,
      port: z.int().min(1).max(65535).meta({ description: 'The TCP port the server listens on inside the sandbox, 1-65535' }),
      expires_in: duration.optional().meta({ description: 'How long the URL works: 30m, 1h (default), 1d; at most 30d' }),
    }),
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    handle: async ({ name, port, expires_in }, { api, signal }) =>
      json(
        await api.request<PreviewUrl>(
          { method: 'POST', path: apiPath('sandboxes', name, 'ports', String(port), 'url'), body: expires_in ? { expires_in } : {} },
          signal,
        ),
      ),
  }),
]);
