import { z } from 'zod';
import { resourceName } from '../../schemas/common.js';
import type { PageSnapshot } from '../../schemas/browser-schemas.js';
import { apiPath } from '../../client/api-client.js';
import { defineTool, json, requiring, text, type Tool } from '../tool.js';
import { sandboxName } from './arguments.js';

const page = resourceName
  .default('default')
  .meta({ description: 'Page (tab) name; default "default". Several names give independent pages.' });
const ref = z.string().optional().meta({ description: 'Ref of the element from the latest snapshot, e.g. "e12"' });
const selector = z.string().optional().meta({ description: 'CSS selector, used only when no ref is given' });
const pagePath = (name: string, pageName: string, ...rest: string[]) => apiPath('sandboxes', name, 'browser', 'pages', pageName, ...rest);

/** A page snapshot as text: the URL, title and refs, then the YAML tree as it is (JSON would escape its lines). */
const snapshotText = ({ url, title, refs, snapshot }: PageSnapshot) =>
  text(`url: ${url}\ntitle: ${title}\nrefs: ${refs.join(', ') || '(none)'}\n\n${snapshot}`);

const SNAPSHOT_REPLY =
  'Returns the page\'s URL, title, refs and its accessibility tree in YAML, where interactive elements carry [ref=eN]; ' +
  'pass a ref to browser_click or browser_fill. Refs belong to the latest snapshot: after any change, use the new ones.';
/** What the tools that change a page answer, said once in browser_snapshot. */
const SAME_SNAPSHOT = 'Returns the page\'s new snapshot, as browser_snapshot does.';

/** Browser automation: Chromium inside a sandbox made from sandboxd/browser:bookworm, reached through the backend's relay. */
export const browserTools: Tool[] = requiring('browser_relay', [
  defineTool({
    name: 'browser_open',
    title: 'Open a URL in the sandbox browser',
    description:
      'Navigate a page of the Chromium inside a running sandbox (image sandboxd/browser:bookworm; started on first use) to ' +
      'a URL, opening the page if needed. The browser runs inside the sandbox, so http://127.0.0.1:PORT reaches servers ' +
      `started there. ${SAME_SNAPSHOT}`,
    inputSchema: z.strictObject({ name: sandboxName, url: z.url({ error: 'must be an absolute URL' }).meta({ description: 'Absolute URL' }), page }),
    annotations: { openWorldHint: true },
    handle: async ({ name, url, page: pageName }, { api, signal }) =>
      snapshotText(await api.request<PageSnapshot>({ method: 'POST', path: pagePath(name, pageName, 'goto'), body: { url } }, signal)),
  }),

  defineTool({
    name: 'browser_snapshot',
    title: 'Snapshot a browser page',
    description: `Take a new snapshot of an open page without navigating. ${SNAPSHOT_REPLY}`,
    inputSchema: z.strictObject({ name: sandboxName, page }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, page: pageName }, { api, signal }) =>
      snapshotText(await api.request<PageSnapshot>({ method: 'GET', path: pagePath(name, pageName) }, signal)),
  }),

  defineTool({
    name: 'browser_click',
    title: 'Click in a browser page',
    description: `Click an element of an open page, by ref from the latest snapshot (or by CSS selector when no ref is given); waits for a navigation it starts. ${SAME_SNAPSHOT}`,
    inputSchema: z.strictObject({ name: sandboxName, ref, selector, page }),
    annotations: { destructiveHint: false, openWorldHint: true },
    handle: async ({ name, page: pageName, ...target }, { api, signal }) =>
      snapshotText(await api.request<PageSnapshot>({ method: 'POST', path: pagePath(name, pageName, 'click'), body: target }, signal)),
  }),

  defineTool({
    name: 'browser_fill',
    title: 'Fill an input in a browser page',
    description: `Replace the value of an input of an open page, by ref from the latest snapshot (or by CSS selector when no ref is given). ${SAME_SNAPSHOT}`,
    inputSchema: z.strictObject({ name: sandboxName, value: z.string({ error: 'must be a string' }).meta({ description: 'The new value' }), ref, selector, page }),
    annotations: { destructiveHint: false, openWorldHint: false },
    handle: async ({ name, page: pageName, ...body }, { api, signal }) =>
      snapshotText(await api.request<PageSnapshot>({ method: 'POST', path: pagePath(name, pageName, 'fill'), body }, signal)),
  }),

  defineTool({
    name: 'browser_screenshot',
    title: 'Screenshot a browser page',
    description: 'A PNG screenshot of the viewport (1280x720) of an open page, as an image.',
    inputSchema: z.strictObject({ name: sandboxName, page }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, page: pageName }, { api, signal }) => {
      const shot = await api.request<{ data: string; mime_type: string }>({ method: 'GET', path: pagePath(name, pageName, 'screenshot') }, signal);
      return { content: [{ type: 'image', data: shot.data, mimeType: shot.mime_type }] };
    },
  }),

  defineTool({
    name: 'browser_close',
    title: 'Close a browser page',
    description: 'Close an open page; its name is free again. Returns a confirmation.',
    inputSchema: z.strictObject({ name: sandboxName, page }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ name, page: pageName }, { api, signal }) => {
      await api.request({ method: 'DELETE', path: pagePath(name, pageName) }, signal);
      return text(`closed page '${pageName}'`);
    },
  }),

  defineTool({
    name: 'browser_events',
    title: 'Browser event log',
    description:
      'The browser actions of a sandbox, oldest first, as a JSON array of {seq, type, page, ts}; type is page.created, ' +
      'page.navigated, page.clicked, page.filled or page.closed. seq counts from 0: pass offset to start from a sequence number.',
    inputSchema: z.strictObject({
      name: sandboxName,
      offset: z.int().min(0).default(0).meta({ description: 'First sequence number; default 0' }),
      limit: z.int().min(1).max(1000).default(100).meta({ description: 'Most events returned; default 100' }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, offset, limit }, { api, signal }) =>
      json(await api.request({ method: 'GET', path: apiPath('sandboxes', name, 'browser', 'events'), query: { offset: String(offset), limit: String(limit) } }, signal)),
  }),
]);
